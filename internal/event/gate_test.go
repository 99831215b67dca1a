package event

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckSeed002(t *testing.T) {
	g := newTestGate(t)
	e, r := g.Check([]byte(seed002), seedArrival)
	consistent(t, e, r)
	if !r.Valid {
		t.Fatalf("sensor example rejected: %q", r.Reasons)
	}
	if e.EventID != "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d" || e.EventType != "sensor.suhu.terbaca" {
		t.Errorf("envelope = %q %q", e.EventID, e.EventType)
	}
	if want := time.Date(2026, 11, 7, 8, 30, 0, 0, time.UTC); !e.OccurredAt.Equal(want) || e.OccurredAt.Location() != time.UTC {
		t.Errorf("OccurredAt = %v, want %v in UTC", e.OccurredAt, want)
	}
	if s, ok := e.String("data.id_perangkat"); !ok || s != "sensor-07" {
		t.Errorf("data.id_perangkat = %q %v", s, ok)
	}
	if f, ok := e.Number("data.suhu_c"); !ok || f != 24.5 {
		t.Errorf("data.suhu_c = %v %v", f, ok)
	}
	if f, ok := e.Number("data.lantai"); !ok || f != 3 {
		t.Errorf("data.lantai = %v %v", f, ok)
	}
	if got, want := string(e.DataJSON()), `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`; got != want {
		t.Errorf("DataJSON = %s, want %s", got, want)
	}
	if string(e.Raw()) != seed002 {
		t.Errorf("Raw = %s", e.Raw())
	}
	// The example's own, pretty-printed layout (docs/requirements.md R-GATE-1).
	pretty := "{\n\"event_id\": \"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d\",\n\"event_type\": \"sensor.suhu.terbaca\",\n" +
		"\"occurred_at\": \"2026-11-07T08:30:00Z\",\n\"data\": {\n\"id_perangkat\": \"sensor-07\",\n\"lantai\": 3,\n\"suhu_c\": 24.5\n}\n}\n"
	e, r = g.Check([]byte(pretty), seedArrival)
	consistent(t, e, r)
	if !r.Valid {
		t.Fatalf("pretty sensor example rejected: %q", r.Reasons)
	}
	if got := string(e.DataJSON()); got != "{\n\"id_perangkat\": \"sensor-07\",\n\"lantai\": 3,\n\"suhu_c\": 24.5\n}" {
		t.Errorf("DataJSON not lossless: %q", got)
	}
}

func TestCheckValidAllocatesOnlyEventID(t *testing.T) {
	g := newTestGate(t)
	raw := []byte(seed002)
	allocs := testing.AllocsPerRun(100, func() {
		if _, r := g.Check(raw, seedArrival); !r.Valid {
			t.Fatal(r.Reasons)
		}
	})
	if allocs > 1 {
		t.Errorf("Check allocates %v times per valid event, want at most 1 (the EventID string)", allocs)
	}
}

// checkCase is one Check input and the exact fields it must fail.
type checkCase struct {
	name    string
	in      string
	arrival time.Time // zero: seedArrival
	fields  []string  // nil: valid
	reason  string    // substring of the first reason
}

func runCheckCases(t *testing.T, g *Gate, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			arr := c.arrival
			if arr.IsZero() {
				arr = seedArrival
			}
			e, r := g.Check([]byte(c.in), arr)
			consistent(t, e, r)
			if !slices.Equal(r.Fields, c.fields) {
				t.Fatalf("fields = %q, want %q; reasons %q", r.Fields, c.fields, r.Reasons)
			}
			if !strings.Contains(r.Reason(), c.reason) {
				t.Fatalf("reason %q does not contain %q", r.Reason(), c.reason)
			}
		})
	}
}

func TestCheckEnvelope(t *testing.T) {
	const id = `"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"`
	const at = `"2026-11-07T08:30:00Z"`
	runCheckCases(t, newTestGate(t), []checkCase{
		{name: "event_id missing", in: variant(t, `"event_id":`+id+`,`, ``), fields: []string{"event_id"}, reason: "event_id: required"},
		{name: "event_id number", in: variant(t, id, `42`), fields: []string{"event_id"}, reason: "must be a string, got number 42"},
		{name: "event_id null", in: variant(t, id, `null`), fields: []string{"event_id"}, reason: "got null"},
		{name: "event_id uppercase", in: variant(t, id, `"A3F8E1D2-7B4C-4E2A-9C1D-5E6F7A8B9C0D"`), fields: []string{"event_id"}, reason: "not a lowercase canonical UUID"},
		{name: "event_id without dashes", in: variant(t, id, `"a3f8e1d27b4c4e2a9c1d5e6f7a8b9c0d"`), fields: []string{"event_id"}},
		{name: "event_id braces", in: variant(t, id, `"{a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d}"`), fields: []string{"event_id"}},
		{name: "event_id urn", in: variant(t, id, `"urn:uuid:a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"`), fields: []string{"event_id"}},
		{name: "event_id not hex", in: variant(t, id, `"g3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"`), fields: []string{"event_id"}},
		{name: "event_id dash misplaced", in: variant(t, id, `"a3f8e1d27-b4c-4e2a-9c1d-5e6f7a8b9c0d"`), fields: []string{"event_id"}},
		{name: "event_id nil uuid", in: variant(t, id, `"00000000-0000-0000-0000-000000000000"`), fields: []string{"event_id"}, reason: "nil UUID"},
		{name: "event_id escaped is decoded", in: variant(t, id, `"\u00613f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"`)},
		{name: "event_id empty", in: variant(t, id, `""`), fields: []string{"event_id"}},

		{name: "event_type missing", in: variant(t, `"event_type":"sensor.suhu.terbaca",`, ``), fields: []string{"event_type"}, reason: "event_type: required"},
		{name: "event_type uppercase", in: variant(t, `"sensor.suhu.terbaca"`, `"Sensor.Suhu.Terbaca"`), fields: []string{"event_type"}, reason: "does not match object.action"},
		{name: "event_type one segment", in: variant(t, `"sensor.suhu.terbaca"`, `"sensor"`), fields: []string{"event_type"}},
		{name: "event_type trailing dot", in: variant(t, `"sensor.suhu.terbaca"`, `"sensor.suhu."`), fields: []string{"event_type"}},
		{name: "event_type double dot", in: variant(t, `"sensor.suhu.terbaca"`, `"sensor..suhu"`), fields: []string{"event_type"}},
		{name: "event_type leading dot", in: variant(t, `"sensor.suhu.terbaca"`, `".sensor.suhu"`), fields: []string{"event_type"}},
		{name: "event_type dash", in: variant(t, `"sensor.suhu.terbaca"`, `"sensor-x.suhu"`), fields: []string{"event_type"}},
		{name: "event_type space", in: variant(t, `"sensor.suhu.terbaca"`, `"sensor.suhu.terbaca "`), fields: []string{"event_type"}},
		{name: "event_type number", in: variant(t, `"sensor.suhu.terbaca"`, `7`), fields: []string{"event_type"}, reason: "must be a string"},
		{name: "event_type unknown", in: variant(t, `"sensor.suhu.terbaca"`, `"sensor.suhu.dibaca"`), fields: []string{"event_type"}, reason: `unknown event type "sensor.suhu.dibaca"`},
		{name: "event_type too long", in: variant(t, `"sensor.suhu.terbaca"`, `"a.`+strings.Repeat("b", 300)+`"`), fields: []string{"event_type"}, reason: "longer than 255"},

		{name: "occurred_at missing", in: variant(t, `"occurred_at":`+at+`,`, ``), fields: []string{"occurred_at"}, reason: "occurred_at: required"},
		{name: "occurred_at number", in: variant(t, at, `1793953800`), fields: []string{"occurred_at"}, reason: "must be a string"},
		{name: "occurred_at no offset", in: variant(t, at, `"2026-11-07T08:30:00"`), fields: []string{"occurred_at"}, reason: "not an RFC 3339 date-time"},
		{name: "occurred_at space", in: variant(t, at, `"2026-11-07 08:30:00Z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at date only", in: variant(t, at, `"2026-11-07"`), fields: []string{"occurred_at"}},
		{name: "occurred_at lowercase z", in: variant(t, at, `"2026-11-07T08:30:00z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at feb 30", in: variant(t, at, `"2026-02-30T08:30:00Z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at hour 24", in: variant(t, at, `"2026-11-07T24:00:00Z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at leap second", in: variant(t, at, `"2026-12-31T23:59:60Z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at comma fraction", in: variant(t, at, `"2026-11-07T08:30:00,5Z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at ten fraction digits", in: variant(t, at, `"2026-11-07T08:30:00.1234567891Z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at offset 24h", in: variant(t, at, `"2026-11-07T08:30:00+24:00"`), fields: []string{"occurred_at"}},
		{name: "occurred_at offset without colon", in: variant(t, at, `"2026-11-07T08:30:00+0700"`), fields: []string{"occurred_at"}},
		{name: "occurred_at unix epoch ok", in: variant(t, at, `"1970-01-01T00:00:00Z"`)},
		{name: "occurred_at before 1970", in: variant(t, at, `"1969-12-31T23:59:59Z"`), fields: []string{"occurred_at"}, reason: "before 1970"},
		{name: "occurred_at year 1", in: variant(t, at, `"0001-01-01T00:00:00Z"`), fields: []string{"occurred_at"}},
		{name: "occurred_at offset converts", in: variant(t, at, `"2026-11-07T15:30:00.5+07:00"`)},
		{name: "occurred_at nanoseconds", in: variant(t, at, `"2026-11-07T08:30:00.123456789Z"`)},

		{name: "future beyond skew", in: variant(t, at, `"2026-11-07T08:36:00.001Z"`), fields: []string{"occurred_at"}, reason: "ahead of arrival 2026-11-07T08:31:00Z (max_future_skew 5m0s)"},
		{name: "future at skew", in: variant(t, at, `"2026-11-07T08:36:00Z"`)},
		{name: "future years", in: variant(t, at, `"2031-11-07T08:30:00Z"`), fields: []string{"occurred_at"}},
		{name: "future via offset", in: variant(t, at, `"2026-11-07T08:40:00-01:00"`), fields: []string{"occurred_at"}},
		{name: "past is fine by default", in: variant(t, at, `"2016-11-07T08:30:00Z"`)},

		{name: "data missing", in: variant(t, `,"data":{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, ``), fields: []string{"data"}, reason: "data: required"},
		{name: "data array", in: variant(t, `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, `[]`), fields: []string{"data"}, reason: "data: must be an object, got array"},
		{name: "data string", in: variant(t, `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, `"{}"`), fields: []string{"data"}, reason: `got string "{}"`},
		{name: "data null", in: variant(t, `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, `null`), fields: []string{"data"}},

		{name: "unknown top-level key allowed", in: variant(t, `{"event_id"`, `{"trace":{"span":"x"},"event_id"`)},
		{name: "duplicate event_id", in: variant(t, `"event_type"`, `"event_id":"b3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type"`), fields: []string{"event_id"}, reason: "event_id: duplicate key"},
		{name: "duplicate via escape", in: variant(t, `"event_type"`, `"event\u005fid":"b3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type"`), fields: []string{"event_id"}, reason: "duplicate key"},
		{name: "duplicate data", in: variant(t, `"data"`, `"data":{},"data"`), fields: []string{"data"}, reason: "duplicate key"},
		{name: "duplicate data, first wins for Parse", in: variant(t, `"data"`, `"data":7,"data"`), fields: []string{"data"}, reason: "duplicate key"},
		{name: "top-level key with control char", in: variant(t, `{"event_id"`, `{"a\u0007b":1,"event_id"`), fields: []string{`a\ab`}, reason: "control character"},
		{name: "top-level empty key", in: variant(t, `{"event_id"`, `{"":1,"event_id"`), fields: []string{`""`}, reason: "is empty"},
		{name: "top-level key with slash", in: variant(t, `{"event_id"`, `{"../../etc/passwd":1,"event_id"`), fields: []string{`../../etc/passwd`}, reason: "path separator"},
		{name: "escaped envelope key is decoded", in: variant(t, `"event_type"`, `"event\u005ftype"`)},

		{name: "everything wrong at once",
			in:     `{"event_id":"X","event_type":"A","occurred_at":"yesterday","data":[]}`,
			fields: []string{"event_id", "occurred_at", "event_type", "data"}, reason: `event_id: "X" is not`},
	})
}

func TestCheckDataRules(t *testing.T) {
	const data = `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`
	withData := func(d string) string { return strings.Replace(seed002, data, d, 1) }
	pay := func(d string) string {
		return `{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"payment.checkout.completed","occurred_at":"2026-11-07T08:30:00Z","data":` + d + `}`
	}
	zr := func(d string) string {
		return `{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"zreport.ofd.received","occurred_at":"2026-11-07T08:30:00Z","data":` + d + `}`
	}
	runCheckCases(t, newTestGate(t), []checkCase{
		{name: "id_perangkat short", in: withData(`{"id_perangkat":"sensor-7","lantai":3,"suhu_c":24.5}`), fields: []string{"data.id_perangkat"}, reason: `data.id_perangkat: "sensor-7" does not match pattern sensor-[0-9]{2}`},
		{name: "pattern anchored at end", in: withData(`{"id_perangkat":"sensor-077","lantai":3,"suhu_c":24.5}`), fields: []string{"data.id_perangkat"}},
		{name: "pattern anchored at start", in: withData(`{"id_perangkat":"xsensor-07","lantai":3,"suhu_c":24.5}`), fields: []string{"data.id_perangkat"}},
		{name: "pattern no newline trick", in: withData(`{"id_perangkat":"sensor-07\n","lantai":3,"suhu_c":24.5}`), fields: []string{"data.id_perangkat"}},
		{name: "pattern path traversal", in: withData(`{"id_perangkat":"../../etc/passwd","lantai":3,"suhu_c":24.5}`), fields: []string{"data.id_perangkat"}},
		{name: "pattern escaped value decoded", in: withData(`{"id_perangkat":"sensor-\u00307","lantai":3,"suhu_c":24.5}`)},
		{name: "id_perangkat number", in: withData(`{"id_perangkat":7,"lantai":3,"suhu_c":24.5}`), fields: []string{"data.id_perangkat"}, reason: "must be a string, got number 7"},
		{name: "id_perangkat missing", in: withData(`{"lantai":3,"suhu_c":24.5}`), fields: []string{"data.id_perangkat"}, reason: "data.id_perangkat: required"},
		{name: "suhu_c above max", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":75}`), fields: []string{"data.suhu_c"}, reason: "data.suhu_c: 75 above max 60"},
		{name: "suhu_c below min", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":-40.5}`), fields: []string{"data.suhu_c"}, reason: "-40.5 below min -40"},
		{name: "suhu_c bounds inclusive", in: withData(`{"id_perangkat":"sensor-07","lantai":1,"suhu_c":60}`)},
		{name: "suhu_c min inclusive", in: withData(`{"id_perangkat":"sensor-07","lantai":10,"suhu_c":-40.0}`)},
		{name: "suhu_c exponent", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":2.45e1}`)},
		{name: "suhu_c string", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":"24.5"}`), fields: []string{"data.suhu_c"}, reason: `must be a number, got string "24.5"`},
		{name: "suhu_c boolean", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":true}`), fields: []string{"data.suhu_c"}, reason: "got boolean true"},
		{name: "suhu_c null is absent", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":null}`), fields: []string{"data.suhu_c"}, reason: "required"},
		{name: "suhu_c object", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":{"v":1}}`), fields: []string{"data.suhu_c"}, reason: "got object"},
		{name: "suhu_c NaN", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":NaN}`), fields: []string{"data.suhu_c"}, reason: "data.suhu_c: NaN is not a finite number"},
		{name: "suhu_c Infinity", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":Infinity}`), fields: []string{"data.suhu_c"}},
		{name: "suhu_c -Infinity", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":-Infinity}`), fields: []string{"data.suhu_c"}},
		{name: "suhu_c -inf", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":-inf}`), fields: []string{"data.suhu_c"}},
		{name: "suhu_c overflow", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":1e999}`), fields: []string{"data.suhu_c"}, reason: "1e999 is not a finite number"},
		{name: "nested NaN", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"extra":{"a":[nan]}}`), fields: []string{"data.extra"}},
		{name: "lantai fraction", in: withData(`{"id_perangkat":"sensor-07","lantai":3.5,"suhu_c":24.5}`), fields: []string{"data.lantai"}, reason: "data.lantai: 3.5 is not an integer"},
		{name: "lantai 3.0 is not an integer", in: withData(`{"id_perangkat":"sensor-07","lantai":3.0,"suhu_c":24.5}`), fields: []string{"data.lantai"}},
		{name: "lantai exponent is not an integer", in: withData(`{"id_perangkat":"sensor-07","lantai":3e0,"suhu_c":24.5}`), fields: []string{"data.lantai"}},
		{name: "lantai zero", in: withData(`{"id_perangkat":"sensor-07","lantai":0,"suhu_c":24.5}`), fields: []string{"data.lantai"}, reason: "data.lantai: 0 below min 1"},
		{name: "lantai eleven", in: withData(`{"id_perangkat":"sensor-07","lantai":11,"suhu_c":24.5}`), fields: []string{"data.lantai"}, reason: "11 above max 10"},
		{name: "lantai string", in: withData(`{"id_perangkat":"sensor-07","lantai":"3","suhu_c":24.5}`), fields: []string{"data.lantai"}, reason: "must be an integer"},
		{name: "lantai huge", in: withData(`{"id_perangkat":"sensor-07","lantai":99999999999999999999,"suhu_c":24.5}`), fields: []string{"data.lantai"}, reason: "does not fit a 64-bit integer"},
		{name: "lantai missing", in: withData(`{"id_perangkat":"sensor-07","suhu_c":24.5}`), fields: []string{"data.lantai"}, reason: "data.lantai: required"},
		{name: "all three wrong, sorted by name", in: withData(`{"suhu_c":"x","lantai":0,"id_perangkat":"s"}`), fields: []string{"data.id_perangkat", "data.lantai", "data.suhu_c"}},
		{name: "extra fields allowed", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"battery":0.9,"tags":["a"]}`)},
		{name: "duplicate data key", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"suhu_c":99}`), fields: []string{"data.suhu_c"}, reason: "duplicate key"},
		{name: "data key with dot", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"a.b":1}`), fields: []string{"data.a.b"}, reason: "path separator"},
		{name: "data key with backslash", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"a\\b":1}`), fields: []string{`data.a\\b`}, reason: "path separator"},
		{name: "data key with NUL", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"a\u0000":1}`), fields: []string{`data.a\x00`}, reason: "control character"},
		{name: "data key with C1 control", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"a\u0085":1}`), fields: []string{`data.a\u0085`}, reason: "control character"},
		{name: "data key unicode ok", in: withData(`{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5,"kelembapan_%":1,"température":2}`)},

		{name: "payment ok", in: pay(`{"user_id":"budi","amount":150000,"currency":"IDR","channel":"web"}`)},
		{name: "payment optional absent", in: pay(`{"user_id":"budi","amount":0}`)},
		{name: "payment optional null", in: pay(`{"user_id":"budi","amount":1,"currency":null}`)},
		{name: "payment enum", in: pay(`{"user_id":"budi","amount":1,"currency":"JPY"}`), fields: []string{"data.currency"}, reason: `data.currency: "JPY" is not one of IDR, RUB, USD, EUR`},
		{name: "payment enum case", in: pay(`{"user_id":"budi","amount":1,"channel":"Web"}`), fields: []string{"data.channel"}},
		{name: "payment user_id slash", in: pay(`{"user_id":"a/b","amount":1}`), fields: []string{"data.user_id"}},
		{name: "payment user_id control char", in: pay(`{"user_id":"a\u0000b","amount":1}`), fields: []string{"data.user_id"}, reason: `"a\u0000b" does not match`},
		{name: "payment user_id too long", in: pay(`{"user_id":"` + strings.Repeat("u", 65) + `","amount":1}`), fields: []string{"data.user_id"}},
		{name: "payment negative", in: pay(`{"user_id":"budi","amount":-0.01}`), fields: []string{"data.amount"}, reason: "below min 0"},
		{name: "payment huge", in: pay(`{"user_id":"budi","amount":1e13}`), fields: []string{"data.amount"}, reason: "1e13 above max 1e+12"},

		{name: "zreport ok", in: zr(`{"fiscal_drive":"9287440300090728","shift":12,"receipts":140,"total":1250000.5,"shift_closed_at":"2026-11-07T22:00:00+03:00"}`)},
		{name: "zreport shift 0", in: zr(`{"fiscal_drive":"9287440300090728","shift":0,"receipts":140,"total":1,"shift_closed_at":"2026-11-07T22:00:00Z"}`), fields: []string{"data.shift"}},
		{name: "zreport drive short", in: zr(`{"fiscal_drive":"92874403","shift":1,"receipts":140,"total":1,"shift_closed_at":"2026-11-07T22:00:00Z"}`), fields: []string{"data.fiscal_drive"}},
		{name: "zreport all missing", in: zr(`{}`), fields: []string{"data.fiscal_drive", "data.receipts", "data.shift", "data.shift_closed_at", "data.total"}},
	})
}

func TestCheckPayload(t *testing.T) {
	g := newTestGate(t, func(o *GateOptions) { o.MaxPayloadBytes = 4096; o.MaxDepth = 8 })
	nested := func(depth int) string {
		return variant(t, `"suhu_c":24.5`, `"suhu_c":24.5,"deep":`+strings.Repeat(`[`, depth-2)+strings.Repeat(`]`, depth-2))
	}
	runCheckCases(t, g, []checkCase{
		{name: "empty", in: ``, fields: []string{"payload"}, reason: "payload: empty record"},
		{name: "whitespace", in: " \n\t", fields: []string{"payload"}, reason: "empty record"},
		{name: "not json", in: `hello`, fields: []string{"payload"}, reason: "payload: not a JSON object"},
		{name: "array", in: `[` + seed002 + `]`, fields: []string{"payload"}, reason: "not a JSON object"},
		{name: "string", in: `"` + seed002 + `"`, fields: []string{"payload"}},
		{name: "null", in: `null`, fields: []string{"payload"}},
		{name: "truncated", in: seed002[:len(seed002)/2], fields: []string{"payload"}, reason: "payload: invalid JSON at byte"},
		{name: "missing final brace", in: seed002[:len(seed002)-1], fields: []string{"payload"}, reason: "unexpected end of input"},
		{name: "trailing garbage", in: seed002 + `x`, fields: []string{"payload"}, reason: "after the top-level object"},
		{name: "two objects", in: seed002 + seed002, fields: []string{"payload"}},
		{name: "trailing whitespace ok", in: " \r\n" + seed002 + "\r\n "},
		{name: "trailing comma", in: variant(t, `24.5}`, `24.5,}`), fields: []string{"payload"}},
		{name: "single quotes", in: variant(t, `"sensor-07"`, `'sensor-07'`), fields: []string{"payload"}},
		{name: "unquoted key", in: variant(t, `"lantai"`, `lantai`), fields: []string{"payload"}},
		{name: "comment", in: variant(t, `"lantai"`, `/*x*/"lantai"`), fields: []string{"payload"}},
		{name: "leading zero", in: variant(t, `"lantai":3`, `"lantai":03`), fields: []string{"payload"}},
		{name: "plus sign", in: variant(t, `"lantai":3`, `"lantai":+3`), fields: []string{"payload"}},
		{name: "bare fraction", in: variant(t, `"lantai":3`, `"lantai":3.`), fields: []string{"payload"}},
		{name: "hex", in: variant(t, `"lantai":3`, `"lantai":0x3`), fields: []string{"payload"}},
		{name: "raw control char", in: variant(t, `"sensor-07"`, "\"sensor-\t07\""), fields: []string{"payload"}, reason: "control character"},
		{name: "bad escape", in: variant(t, `"sensor-07"`, `"sensor-\x07"`), fields: []string{"payload"}, reason: "invalid escape"},
		{name: "short unicode escape", in: variant(t, `"sensor-07"`, `"sensor-\u07"`), fields: []string{"payload"}},
		{name: "invalid utf8", in: variant(t, `"sensor-07"`, "\"sensor-\xff07\""), fields: []string{"payload"}, reason: "payload: invalid UTF-8 at byte"},
		{name: "overlong utf8", in: variant(t, `"sensor-07"`, "\"sensor-\xc0\xaf\""), fields: []string{"payload"}, reason: "invalid UTF-8"},
		{name: "utf16 surrogate bytes", in: variant(t, `"sensor-07"`, "\"\xed\xa0\x80\""), fields: []string{"payload"}, reason: "invalid UTF-8"},
		{name: "bom", in: "\xef\xbb\xbf" + seed002, fields: []string{"payload"}},
		{name: "nul byte outside", in: seed002 + "\x00", fields: []string{"payload"}},
		{name: "depth at limit", in: nested(8)},
		{name: "depth over limit", in: nested(9), fields: []string{"payload"}, reason: "payload: JSON nested deeper than max_depth 8"},
		{name: "at size limit", in: variant(t, `"suhu_c":24.5`, `"suhu_c":24.5,"pad":"`+strings.Repeat("x", 4096-len(seed002)-9)+`"`)},
		{name: "over size limit", in: variant(t, `"suhu_c":24.5`, `"suhu_c":24.5,"pad":"`+strings.Repeat("x", 4096-len(seed002)-8)+`"`), fields: []string{"payload"}, reason: "payload: 4097 bytes exceeds max_payload_bytes 4096"},
		{name: "NaN in unknown top-level key", in: variant(t, `{"event_id"`, `{"x":[1,NaN],"event_id"`), fields: []string{"x"}, reason: "x: NaN is not a finite number"},
		{name: "NaN in event_id", in: variant(t, `"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"`, `NaN`), fields: []string{"event_id"}},
		{name: "bare word", in: variant(t, `24.5`, `nope`), fields: []string{"payload"}},
		{name: "nul literal", in: variant(t, `24.5`, `nul`), fields: []string{"payload"}},
		{name: "tru literal", in: variant(t, `24.5`, `tru`), fields: []string{"payload"}},
		{name: "NaNa", in: variant(t, `24.5`, `NaNa`), fields: []string{"payload"}},
	})
}

func TestCheckArrival(t *testing.T) {
	g := newTestGate(t, func(o *GateOptions) { o.MaxFutureSkew = time.Minute; o.MaxPastAge = 24 * time.Hour })
	arr := time.Date(2026, 11, 7, 8, 30, 0, 0, time.FixedZone("WIB", 7*3600))
	runCheckCases(t, g, []checkCase{
		{name: "skew configured", in: variant(t, `"2026-11-07T08:30:00Z"`, `"2026-11-07T08:32:00.5Z"`), arrival: seedArrival, fields: []string{"occurred_at"}, reason: "is 1m0.5s ahead"},
		{name: "skew boundary", in: variant(t, `"2026-11-07T08:30:00Z"`, `"2026-11-07T08:32:00Z"`), arrival: seedArrival},
		{name: "past age", in: variant(t, `"2026-11-07T08:30:00Z"`, `"2026-11-05T08:30:00Z"`), arrival: seedArrival, fields: []string{"occurred_at"}, reason: "before arrival 2026-11-07T08:31:00Z (max_past_age 24h0m0s)"},
		{name: "past age boundary", in: variant(t, `"2026-11-07T08:30:00Z"`, `"2026-11-06T08:31:00Z"`), arrival: seedArrival},
		{name: "arrival in another zone", in: seed002, arrival: arr, fields: []string{"occurred_at"}, reason: "ahead of arrival 2026-11-07T01:30:00Z"},
	})
	// runCheckCases substitutes seedArrival for a zero arrival; check the
	// zero arrival directly.
	if _, r := g.Check([]byte(variant(t, `"2026-11-07T08:30:00Z"`, `"2099-11-07T08:30:00Z"`)), time.Time{}); !r.Valid {
		t.Errorf("zero arrival: %q", r.Reasons)
	}
}

func TestCheckUnknownTypesAllowed(t *testing.T) {
	g := newTestGate(t, func(o *GateOptions) { o.AllowUnknownTypes = true })
	in := variant(t, `"sensor.suhu.terbaca"`, `"door.opened"`, `"lantai":3`, `"lantai":"x"`)
	e, r := g.Check([]byte(in), seedArrival)
	consistent(t, e, r)
	if !r.Valid || e.EventType != "door.opened" {
		t.Fatalf("unknown type with AllowUnknownTypes: %v %q", e, r.Reasons)
	}
	// Envelope rules still apply.
	_, r = g.Check([]byte(variant(t, `"sensor.suhu.terbaca"`, `"Door.Opened"`)), seedArrival)
	if !slices.Equal(r.Fields, []string{"event_type"}) {
		t.Fatalf("bad type with AllowUnknownTypes: %q", r.Reasons)
	}
}

func TestParse(t *testing.T) {
	g := newTestGate(t)
	// Parse ignores the type, data and time rules.
	in := variant(t, `"sensor.suhu.terbaca"`, `"Not A Type"`, `"lantai":3`, `"lantai":"x"`, `"2026-11-07T08:30:00Z"`, `"2099-11-07T08:30:00+01:00"`)
	e, r := g.Parse([]byte(in))
	consistent(t, e, r)
	if !r.Valid {
		t.Fatalf("Parse: %q", r.Reasons)
	}
	if e.EventType != "Not A Type" || !e.OccurredAt.Equal(time.Date(2099, 11, 7, 7, 30, 0, 0, time.UTC)) || e.OccurredAt.Location() != time.UTC {
		t.Errorf("Parse envelope = %q %v", e.EventType, e.OccurredAt)
	}
	// Data need not be an object, nor present.
	for _, in := range []string{
		variant(t, `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, `[1]`),
		variant(t, `,"data":{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, ``),
		variant(t, `"event_type":"sensor.suhu.terbaca",`, ``),
	} {
		if _, r := g.Parse([]byte(in)); !r.Valid {
			t.Errorf("Parse(%s): %q", in, r.Reasons)
		}
	}
	// But the structural minimum is enforced.
	for in, field := range map[string]string{
		variant(t, `"a3f8e1d2`, `"A3f8e1d2`):                          "event_id",
		variant(t, `"2026-11-07T08:30:00Z"`, `"2026-11-07T08:30:00"`): "occurred_at",
		variant(t, `24.5`, `NaN`):                                     "data.suhu_c",
		variant(t, `24.5`, `24.5,"suhu_c":1`):                         "", // data duplicates are Check's business
		`{}`:                                                          "event_id",
		`{"event_id":`:                                                "payload",
	} {
		_, r := g.Parse([]byte(in))
		if field == "" {
			if !r.Valid {
				t.Errorf("Parse(%s): %q", in, r.Reasons)
			}
			continue
		}
		if len(r.Fields) == 0 || r.Fields[0] != field {
			t.Errorf("Parse(%s) fields %q, want %s first", in, r.Fields, field)
		}
	}
}

func TestNewGateDefaults(t *testing.T) {
	g, err := NewGate(GateOptions{AllowUnknownTypes: true})
	if err != nil {
		t.Fatal(err)
	}
	if g.maxPayload != 1<<20 || g.maxFutureSkew != 5*time.Minute || g.maxDepth != 32 || g.maxPastAge != 0 {
		t.Fatalf("defaults: %d %v %d %v", g.maxPayload, g.maxFutureSkew, g.maxDepth, g.maxPastAge)
	}
	pad := func(total int) []byte {
		s := variant(t, `"suhu_c":24.5`, `"suhu_c":24.5,"pad":"`)
		return []byte(s[:len(s)-2] + strings.Repeat("x", total-len(s)-1) + `"}}`)
	}
	if _, r := g.Check(pad(1<<20), seedArrival); !r.Valid {
		t.Errorf("1 MiB rejected: %q", r.Reasons)
	}
	if _, r := g.Check(pad(1<<20+1), seedArrival); r.Valid || r.Fields[0] != "payload" {
		t.Errorf("1 MiB + 1 accepted: %q", r.Reasons)
	}
	deep := func(depth int) []byte {
		return []byte(variant(t, `"suhu_c":24.5`, `"suhu_c":24.5,"deep":`+strings.Repeat(`{"a":`, depth-2)+`1`+strings.Repeat(`}`, depth-2)))
	}
	if _, r := g.Check(deep(32), seedArrival); !r.Valid {
		t.Errorf("depth 32 rejected: %q", r.Reasons)
	}
	if _, r := g.Check(deep(33), seedArrival); r.Valid || r.Fields[0] != "payload" {
		t.Errorf("depth 33 accepted: %q", r.Reasons)
	}
	if _, r := g.Check([]byte(variant(t, `08:30:00Z`, `08:36:00Z`)), seedArrival); !r.Valid {
		t.Errorf("5m skew rejected: %q", r.Reasons)
	}
	if _, r := g.Check([]byte(variant(t, `08:30:00Z`, `08:36:01Z`)), seedArrival); r.Valid {
		t.Errorf("5m1s skew accepted")
	}
}

func TestNewGateReportsEveryProblem(t *testing.T) {
	opts := GateOptions{
		MaxPayloadBytes: -1,
		MaxFutureSkew:   -time.Second,
		MaxPastAge:      -time.Second,
		MaxDepth:        1,
		Types: map[string]TypeRules{
			"Bad.Type": {},
			"a.b": {Fields: map[string]FieldRule{
				"re":       {Type: "string", Pattern: "sensor-[0-9"},
				"unbal":    {Type: "string", Pattern: "a)|(b"},
				"typ":      {Type: "float"},
				"minmax":   {Type: "number", Min: ptr(2), Max: ptr(1)},
				"nan":      {Type: "number", Min: ptr(math.NaN())},
				"mixed":    {Pattern: "x", Max: ptr(1)},
				"strOnNum": {Type: "number", Pattern: "x"},
				"numOnStr": {Type: "string", Min: ptr(1)},
				"lens":     {Type: "string", MinLen: 5, MaxLen: 2},
				"neglen":   {Type: "string", MinLen: -1},
				"a.b":      {Type: "string"},
				"ok":       {Type: "integer", Min: ptr(1)},
			}},
		},
	}
	_, err := NewGate(opts)
	if err == nil {
		t.Fatal("NewGate accepted bad options")
	}
	if !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("error does not wrap ErrInvalidOptions: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"gate.max_payload_bytes", "gate.max_future_skew", "gate.max_past_age", "gate.max_depth",
		"gate.types.Bad.Type: not a valid event type",
		"gate.types.a.b.fields.re.pattern: error parsing regexp",
		"gate.types.a.b.fields.unbal.pattern",
		`gate.types.a.b.fields.typ.type: "float"`,
		"gate.types.a.b.fields.minmax: min 2 > max 1",
		"gate.types.a.b.fields.nan.min: NaN",
		"gate.types.a.b.fields.mixed: has string",
		"gate.types.a.b.fields.strOnNum: pattern, min_len, max_len and enum apply to strings",
		"gate.types.a.b.fields.numOnStr: min and max apply to numbers",
		"gate.types.a.b.fields.lens: min_len 5 > max_len 2",
		"gate.types.a.b.fields.neglen.min_len",
		"gate.types.a.b.fields.a.b: field name contains a path separator",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "fields.ok") {
		t.Errorf("good rule reported:\n%s", msg)
	}
	if n := strings.Count(msg, "\n") + 1; n != 16 {
		t.Errorf("%d problems reported, want 16:\n%s", n, msg)
	}
}

func TestRuleTypeInferred(t *testing.T) {
	g := newTestGate(t, func(o *GateOptions) {
		o.Types["sensor.suhu.terbaca"] = TypeRules{Fields: map[string]FieldRule{
			"id_perangkat": {Pattern: "sensor-[0-9]{2}"},
			"suhu_c":       {Max: ptr(60)},
			"flag":         {Type: "boolean", Required: true},
			"obj":          {Type: "object"},
			"arr":          {Type: "array"},
			"any":          {Required: true},
			"short":        {Type: "string", MinLen: 2, MaxLen: 3},
		}}
	})
	withData := func(d string) string {
		return strings.Replace(seed002, `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, d, 1)
	}
	runCheckCases(t, g, []checkCase{
		{name: "ok", in: withData(`{"id_perangkat":"sensor-07","suhu_c":1,"flag":false,"obj":{},"arr":[],"any":null,"short":"ab"}`), fields: []string{"data.any"}, reason: "data.any: required"},
		{name: "any takes anything", in: withData(`{"flag":true,"any":[1]}`)},
		{name: "inferred string", in: withData(`{"id_perangkat":7,"flag":true,"any":1}`), fields: []string{"data.id_perangkat"}, reason: "must be a string"},
		{name: "inferred number", in: withData(`{"suhu_c":"7","flag":true,"any":1}`), fields: []string{"data.suhu_c"}, reason: "must be a number"},
		{name: "boolean", in: withData(`{"flag":1,"any":1}`), fields: []string{"data.flag"}, reason: "must be a boolean, got number 1"},
		{name: "object", in: withData(`{"flag":true,"any":1,"obj":[]}`), fields: []string{"data.obj"}, reason: "must be an object, got array"},
		{name: "array", in: withData(`{"flag":true,"any":1,"arr":{}}`), fields: []string{"data.arr"}, reason: "must be an array, got object"},
		{name: "min_len", in: withData(`{"flag":true,"any":1,"short":"a"}`), fields: []string{"data.short"}, reason: "length 1 below min_len 2"},
		{name: "max_len", in: withData(`{"flag":true,"any":1,"short":"abcd"}`), fields: []string{"data.short"}, reason: "length 4 above max_len 3"},
		{name: "len in bytes", in: withData(`{"flag":true,"any":1,"short":"éé"}`), fields: []string{"data.short"}, reason: "length 4 above"},
	})
}

func TestManyRulesAndKeys(t *testing.T) {
	// More than 8 rules use the index map; more than 32 keys the dup map.
	fields := map[string]FieldRule{}
	name := func(i int) string { return fmt.Sprintf("f%02d", i) }
	for i := range 20 {
		fields[name(i)] = FieldRule{Type: "integer", Required: i%2 == 0}
	}
	g := newTestGate(t, func(o *GateOptions) { o.Types["sensor.suhu.terbaca"] = TypeRules{Fields: fields} })
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + name(i) + `":1`)
	}
	b.WriteString("}")
	in := strings.Replace(seed002, `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}`, b.String(), 1)
	if _, r := g.Check([]byte(in), seedArrival); !r.Valid {
		t.Fatalf("%q", r.Reasons)
	}
	in2 := strings.Replace(in, `"f02":1`, `"f02":1.5`, 1)
	in2 = strings.Replace(in2, `}}`, `,"f04":2,"f35":3}}`, 1)
	_, r := g.Check([]byte(in2), seedArrival)
	if !slices.Equal(r.Fields, []string{"data.f04", "data.f35", "data.f02"}) {
		t.Fatalf("fields %q, reasons %q", r.Fields, r.Reasons)
	}
}

func TestResultReason(t *testing.T) {
	if (Result{Valid: true}).Reason() != "" {
		t.Error("valid result has a reason")
	}
	if r := (Result{Fields: []string{"a", "b"}, Reasons: []string{"a: x", "b: y"}}); r.Reason() != "a: x" {
		t.Errorf("Reason = %q", r.Reason())
	}
}

func TestNewDeadLetter(t *testing.T) {
	g := newTestGate(t)
	_, r := g.Check([]byte(variant(t, `24.5`, `75`)), seedArrival)
	now := seedArrival.Add(time.Second)
	d := NewDeadLetter(r, "m8-suhu-kejadian", 2, 1234, seedArrival, now)
	if d.Reason != "data.suhu_c: 75 above max 60" || !slices.Equal(d.Fields, []string{"data.suhu_c"}) || !slices.Equal(d.Reasons, r.Reasons) {
		t.Errorf("dead letter = %+v", d)
	}
	if d.SourceTopic != "m8-suhu-kejadian" || d.SourcePartition != 2 || d.SourceOffset != 1234 ||
		!d.SourceTimestamp.Equal(seedArrival) || !d.DeadAt.Equal(now) || d.Attempts != 1 || d.Stage != "gate" {
		t.Errorf("dead letter = %+v", d)
	}
	h := map[string]string{}
	for _, kv := range d.Headers() {
		h[kv.Key] = string(kv.Value)
	}
	if h[HeaderReason] != d.Reason || h[HeaderFields] != "data.suhu_c" || h[HeaderStage] != "gate" || h[HeaderSourceOffset] != "1234" {
		t.Errorf("headers = %q", h)
	}
}

func TestResultsAreIndependent(t *testing.T) {
	g := newTestGate(t)
	_, r1 := g.Check([]byte(variant(t, `24.5`, `75`)), seedArrival)
	_, r2 := g.Check([]byte(variant(t, `"lantai":3`, `"lantai":0`)), seedArrival)
	if !slices.Equal(r1.Fields, []string{"data.suhu_c"}) || !slices.Equal(r2.Fields, []string{"data.lantai"}) {
		t.Fatalf("results share storage: %q %q", r1.Fields, r2.Fields)
	}
	e, r := g.Check([]byte(seed002), seedArrival)
	if !r.Valid || r.Fields != nil {
		t.Fatalf("valid result carries fields %q", r.Fields)
	}
	_ = e
}

func TestGateReleasesHugeScratch(t *testing.T) {
	g := newTestGate(t)
	big := variant(t, `"suhu_c":24.5`, `"suhu_c":24.5,"many":[`+strings.Repeat("1,", 20000)+`1],"esc":"`+strings.Repeat(`\u0041`, 20000)+`"`)
	e, r := g.Check([]byte(big), seedArrival)
	if !r.Valid {
		t.Fatal(r.Reasons)
	}
	if s, _ := e.String("data.esc"); len(s) != 20000 {
		t.Fatalf("esc has %d bytes", len(s))
	}
	if cap(g.tape.nodes) <= maxRetainedNodes {
		t.Fatalf("tape of %d nodes", cap(g.tape.nodes))
	}
	e, r = g.Check([]byte(seed002), seedArrival)
	if !r.Valid || e.EventID != "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d" {
		t.Fatal(r.Reasons)
	}
	if cap(g.tape.nodes) > maxRetainedNodes {
		t.Errorf("tape of %d nodes kept after a small record", cap(g.tape.nodes))
	}
}

// TestParseUUIDMatchesReference checks the SWAR decoder against a plain
// one on the seed id and every one-byte change of it.
func TestParseUUIDMatchesReference(t *testing.T) {
	ref := func(s string) ([16]byte, bool) {
		var id [16]byte
		if len(s) != 36 {
			return id, false
		}
		j := 0
		for i := 0; i < 36; i++ {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != '-' {
					return [16]byte{}, false
				}
				continue
			}
			var v byte
			switch c := s[i]; {
			case '0' <= c && c <= '9':
				v = c - '0'
			case 'a' <= c && c <= 'f':
				v = c - 'a' + 10
			default:
				return [16]byte{}, false
			}
			id[j/2] |= v << (4 * (1 - j%2))
			j++
		}
		return id, true
	}
	check := func(s string) {
		got, ok := ParseUUID(s)
		want, wantOK := ref(s)
		if ok != wantOK || got != want || isUUID([]byte(s)) != wantOK {
			t.Fatalf("ParseUUID(%q) = %x %v, want %x %v", s, got, ok, want, wantOK)
		}
	}
	base := "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"
	check(base)
	check("00000000-0000-0000-0000-000000000000")
	check("ffffffff-ffff-ffff-ffff-ffffffffffff")
	check("01234567-89ab-cdef-0123-456789abcdef")
	for i := range len(base) {
		for c := 0; c < 256; c++ {
			b := []byte(base)
			b[i] = byte(c)
			check(string(b))
		}
		check(base[:i] + base[i+1:])
	}
	if n := testing.AllocsPerRun(100, func() { ParseUUID(base) }); n != 0 {
		t.Errorf("ParseUUID allocates %v times", n)
	}
}
