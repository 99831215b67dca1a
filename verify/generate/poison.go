package generate

import (
	"strconv"
	"strings"
	"time"
)

// PoisonKind is a way a record is invalid.
type PoisonKind string

// Poison kinds. Each names the field the quality gate is expected to report
// (Record.Field); the comment gives it for the sensors scenario.
const (
	// BadJSON: the envelope cut short — not JSON (Kafka only). Field
	// payload.
	BadJSON PoisonKind = "bad_json"
	// BadUUID: event_id is not a UUID. Field event_id.
	BadUUID PoisonKind = "bad_uuid"
	// OutOfRange: a value outside its bounds (85 °C and -127 °C are what
	// a DS18B20 reports on power-on reset and disconnect). Field
	// data.suhu_c or data.lantai.
	OutOfRange PoisonKind = "out_of_range"
	// WrongType: a number sent as a string, or a fraction where an integer
	// belongs. Field data.suhu_c or data.lantai.
	WrongType PoisonKind = "wrong_type"
	// UnknownType: an event type without gate rules. Field event_type.
	UnknownType PoisonKind = "unknown_type"
	// NaN: the value written as the bare literal NaN, which is not JSON
	// (Kafka only); the gate attributes it to its field. Field data.suhu_c.
	NaN PoisonKind = "nan"
	// Future: occurred_at further ahead of arrival than the gate's max
	// future skew. Field occurred_at.
	Future PoisonKind = "future"
	// Oversized: a valid envelope padded past the gate's payload limit.
	// Field payload.
	Oversized PoisonKind = "oversized"
	// BadKey: the entity key breaks its pattern (path separators, control
	// characters, wrong shape). Field data.id_perangkat.
	BadKey PoisonKind = "bad_key"
	// MissingField: the aggregated value is absent. Field data.suhu_c.
	MissingField PoisonKind = "missing_field"
)

// PoisonKinds lists every kind.
var PoisonKinds = []PoisonKind{BadJSON, BadUUID, OutOfRange, WrongType, UnknownType, NaN, Future, Oversized, BadKey, MissingField}

func joinKinds(ks []PoisonKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// FieldPayload is the field the quality gate names for record-level
// rejections: a value that is not JSON or over the size limit (event.Gate
// names envelope fields by name, data fields as data.<name>).
const FieldPayload = "payload"

// poison turns the valid envelope e (whose record arrives at arrival) into
// poison of kind k. It returns the value, the expected field, whether the
// value is still JSON, and the record key.
func (g *Generator) poison(k PoisonKind, e *envelope, key string, arrival time.Time) (value []byte, fld string, isJSON bool, newKey string) {
	r := g.r
	keyField, valField := g.keyField, g.valField
	newKey = key
	switch k {
	case BadJSON:
		v := e.render()
		return v[:1+r.intn(len(v)-2)], FieldPayload, false, key
	case BadUUID:
		switch r.intn(3) {
		case 0:
			e.id = e.id[:35]
		case 1:
			e.id = "z" + e.id[1:]
		default:
			e.id = "evt-" + strconv.Itoa(100000+r.intn(900000))
		}
		return e.render(), "event_id", true, key
	case OutOfRange:
		switch g.o.Scenario {
		case Sensors:
			if r.chance(0.3) {
				e.set("lantai", rawInt(int64([]int{0, 11, -1, 42}[r.intn(4)])))
				fld = "data.lantai"
			} else {
				e.set("suhu_c", rawFloat([]float64{85, -127, 60.5, -40.0625}[r.intn(4)]))
				fld = "data.suhu_c"
			}
		case Payments:
			e.set("amount", rawInt(-int64(1000*(1+r.intn(500)))))
			fld = "data.amount"
		case Fiscal:
			if r.chance(0.5) {
				e.set("receipts", rawInt(-1-int64(r.intn(5))))
				fld = "data.receipts"
			} else {
				e.set("shift", rawInt(0))
				fld = "data.shift"
			}
		}
		return e.render(), fld, true, key
	case WrongType:
		switch g.o.Scenario {
		case Sensors:
			if r.chance(0.3) {
				e.set("lantai", []byte("3.5"))
				fld = "data.lantai"
			} else {
				e.set("suhu_c", rawString(string(e.get("suhu_c"))))
				fld = "data.suhu_c"
			}
		case Payments:
			e.set("amount", rawString(string(e.get("amount"))))
			fld = "data.amount"
		case Fiscal:
			if r.chance(0.5) {
				e.set("shift", rawString(string(e.get("shift"))))
				fld = "data.shift"
			} else {
				e.set("receipts", []byte(string(e.get("receipts"))+".5"))
				fld = "data.receipts"
			}
		}
		return e.render(), fld, true, key
	case UnknownType:
		unknown := map[Scenario][]string{
			Sensors:  {"sensor.suhu.dikalibrasi", "sensor.kelembapan.terbaca"},
			Payments: {"payment.checkout.refunded", "payment.checkout.started"},
			Fiscal:   {"zreport.pos.computed", "zreport.bank.received"},
		}[g.o.Scenario]
		e.typ = unknown[r.intn(len(unknown))]
		return e.render(), "event_type", true, key
	case NaN:
		v := string(e.render())
		name := `"` + valField + `":`
		i := strings.Index(v, name) + len(name)
		j := i + strings.IndexAny(v[i:], ",}")
		return []byte(v[:i] + "NaN" + v[j:]), "data." + valField, false, key
	case Future:
		ahead := g.o.Target.MaxFutureSkew + time.Minute + time.Duration(r.between(0, float64(48*time.Hour)))
		e.occurred = fmtTime(arrival.Add(ahead).Truncate(time.Millisecond))
		return e.render(), "occurred_at", true, key
	case Oversized:
		// A firmware log dump: repetitive, so the producer's compression
		// gets the batch under the broker's max.message.bytes while the
		// gate sees the full size.
		line := "E (" + strconv.Itoa(r.intn(100000)) + ") i2c: timeout on bus 1, retrying; "
		need := max(1, g.o.Target.MaxPayloadBytes+1+r.intn(1024)-len(e.render())-len(`,"debug_dump":""`))
		dump := make([]byte, 0, need+2)
		dump = append(dump, '"')
		for len(dump) < need+1 {
			dump = append(dump, line[:min(len(line), need+1-len(dump))]...)
		}
		e.set("debug_dump", append(dump, '"'))
		return e.render(), FieldPayload, true, key
	case BadKey:
		switch g.o.Scenario {
		case Sensors:
			newKey = []string{"sensor-7", "SENSOR-07", "sensor-07/../../etc", "sensor-0\x07", "sensor-100"}[r.intn(5)]
		case Payments:
			newKey = []string{"budi/../../etc/passwd", "Budi Santoso", "", strings.Repeat("x", 65), "siti\r\n", "dewi\\..\\"}[r.intn(6)]
		case Fiscal:
			d := string(e.get("fiscal_drive"))
			d = d[1 : len(d)-1]
			newKey = []string{d[:15], d[:8] + "ABCDEFGH", d + "0", "../" + d[3:]}[r.intn(4)]
		}
		e.set(keyField, rawString(newKey))
		if g.o.Scenario == Fiscal {
			newKey += key[strings.IndexByte(key, '/'):]
		}
		return e.render(), "data." + keyField, true, newKey
	case MissingField:
		e.remove(valField)
		return e.render(), "data." + valField, true, key
	}
	panic("generate: unknown poison kind " + string(k))
}
