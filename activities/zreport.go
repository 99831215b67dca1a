package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"reckon/lake"
	"reckon/zreport"
	"reckon/zreport/ofd"
)

// Producer is the part of *kgo.Client the Z-report activities use.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// ZReport holds the dependencies of the Z-report activities: publishing
// aggregates and changelogs (Kafka, lake), restoring an entity from the
// lake, and asking the fiscal data operator for an OFD document. Its
// methods are safe for concurrent use.
type ZReport struct {
	// Producer publishes to CompleteTopic and IncompleteTopic.
	Producer        Producer
	CompleteTopic   string
	IncompleteTopic string
	// Lake holds the zreports table (<lake>/zreports/), on a directory or
	// object storage.
	Lake *lake.Lake
	// OFDURL is the operator API's base URL (see package ofd for the
	// contract).
	OFDURL string
	// HTTP is the client for the operator; its Timeout bounds one request.
	// Nil means a client with a 10s timeout.
	HTTP *http.Client
}

// ZReportPublication is one thing to publish: a changelog entry of a key
// still waiting, or a final version. Exactly one field is set.
type ZReportPublication struct {
	Changelog *zreport.Changelog `json:"changelog,omitempty"`
	Final     *zreport.Aggregate `json:"final,omitempty"`
}

// ZReportPublished reports what PublishZReport wrote: lake paths relative
// to the lake root.
type ZReportPublished struct {
	Files   []string `json:"files,omitempty"`
	Records int      `json:"records"`
}

// Header names on published Z-report records.
const (
	HeaderZReportVersion = "reckon.zreport.version"
	HeaderZReportStatus  = "reckon.zreport.status"
)

// PublishZReport publishes pubs in order. A final version is written to
// the lake first (zreports/close_date=…/<drive>-<shift>-v<version>.parquet,
// atomically), then to the complete topic, followed by a tombstone for the
// key on the incomplete topic (the key left the incomplete set); a
// changelog entry goes to the incomplete topic. Records are keyed
// fiscal_drive/shift. A retry rewrites the same files and may publish a
// record again; consumers keep the highest version (complete) or the
// latest seq (incomplete), so repeats are harmless.
func (a *ZReport) PublishZReport(ctx context.Context, pubs []ZReportPublication) (ZReportPublished, error) {
	var out ZReportPublished
	var recs []*kgo.Record
	for _, p := range pubs {
		switch {
		case p.Final != nil:
			f := p.Final
			rel, err := writeZReportFile(ctx, a.Lake, f)
			if err != nil {
				if errors.Is(err, zreport.ErrInvalidPart) {
					return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeZReportInput, err)
				}
				return out, err
			}
			out.Files = append(out.Files, rel)
			v, err := json.Marshal(f)
			if err != nil {
				return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeZReportInput, err)
			}
			k := []byte(f.Key().String())
			recs = append(recs,
				&kgo.Record{Topic: a.CompleteTopic, Key: k, Value: v, Headers: []kgo.RecordHeader{
					{Key: HeaderZReportVersion, Value: []byte(strconv.FormatInt(f.Version, 10))},
					{Key: HeaderZReportStatus, Value: []byte(f.Status)},
				}},
				&kgo.Record{Topic: a.IncompleteTopic, Key: k})
		case p.Changelog != nil:
			v, err := json.Marshal(p.Changelog)
			if err != nil {
				return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeZReportInput, err)
			}
			recs = append(recs, &kgo.Record{Topic: a.IncompleteTopic, Key: []byte(p.Changelog.Key().String()), Value: v,
				Headers: []kgo.RecordHeader{{Key: HeaderZReportStatus, Value: []byte(p.Changelog.Status)}}})
		}
	}
	if len(recs) == 0 {
		return out, nil
	}
	if a.Producer == nil {
		return out, temporal.NewNonRetryableApplicationError("zreport: no Kafka producer configured", ErrTypeZReportInput,
			nil)
	}
	if err := a.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return out, fmt.Errorf("zreport: publish: %w", err)
	}
	out.Records = len(recs)
	return out, nil
}

// OFDAnswer is the operator's answer: Found with the document as an OFD
// part, or not found (404: not available yet).
type OFDAnswer struct {
	Found    bool          `json:"found"`
	Document *zreport.Part `json:"document,omitempty"`
	Status   int           `json:"status"`
}

// RequestOFD asks the operator for k's Z-report: GET
// <OFDURL>/v1/zreports/<fiscal_drive>/<shift>.
//
//   - 200: the document (an OFD part; its event_id, or "ofd-<drive>-<shift>").
//   - 404: not available yet — a business answer, returned as Found=false
//     without error. The workflow asks again after zreport.ofd_retry rather
//     than hammering the operator with activity retries.
//   - 408, 429, 5xx, network errors, timeouts: a retryable error; the
//     activity's RetryPolicy backs off exponentially.
//   - other 4xx, or an unusable 200: non-retryable (OFDClientError,
//     OFDBadDocument): repeating the same request cannot help.
func (a *ZReport) RequestOFD(ctx context.Context, k zreport.Key) (OFDAnswer, error) {
	c := ofd.Client{BaseURL: a.OFDURL, HTTP: a.HTTP}
	p, found, status, err := c.Fetch(ctx, k)
	if err != nil {
		switch ofd.KindOf(err) {
		case ofd.KindClient:
			return OFDAnswer{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeOFDClient, err)
		case ofd.KindBadDocument:
			return OFDAnswer{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeOFDBadDocument, err)
		}
		return OFDAnswer{}, err
	}
	if !found {
		return OFDAnswer{Status: status}, nil
	}
	return OFDAnswer{Found: true, Document: &p, Status: status}, nil
}

// LoadZReport returns k's latest published version from the lake, or nil
// when there is none. closedHint is the shift close time of the part that
// started the entity; the lookup covers its UTC date and the days either
// side (sources may disagree about the close time around midnight).
func (a *ZReport) LoadZReport(ctx context.Context, k zreport.Key, closedHint time.Time) (*zreport.Aggregate, error) {
	if err := k.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeZReportInput, err)
	}
	if closedHint.IsZero() {
		return nil, nil
	}
	return ReadLatestZReport(ctx, a.Lake, k, closedHint)
}
