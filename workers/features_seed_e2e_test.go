package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/lake"
)

// seedFeatures is testdata/features/seed000.json: the fraud-features seed
// text's events and what its stream and batch print.
type seedFeatures struct {
	RollingSeconds int `json:"rolling_seconds"`
	OOOSeconds     int `json:"out_of_orderness_seconds"`
	Events         []struct {
		ET      int     `json:"et"`
		Arrival int     `json:"arrival"`
		User    string  `json:"user"`
		Amount  float64 `json:"amount"`
		Served  *struct {
			Count int64   `json:"count"`
			Sum   float64 `json:"sum"`
		} `json:"served"`
		Late bool `json:"late"`
	} `json:"events"`
	Last []struct {
		User   string `json:"user"`
		Stream struct {
			Count int64   `json:"count"`
			Sum   float64 `json:"sum"`
		} `json:"stream"`
		Batch struct {
			Count int64   `json:"count"`
			Sum   float64 `json:"sum"`
		} `json:"batch"`
		Match bool `json:"match"`
	} `json:"last"`
}

// TestSeedFeaturesEndToEnd is the fraud-features seed text on real
// processes: kfake, the Temporal dev server, the stream worker and the
// batch worker with its long-running workflows. The text's 14 checkout
// events go to payments in their arrival order (times relative to the
// test's start; rolling 60 s, out-of-orderness 5 s, lateness 0, one
// partition as in the text), then one later event moves the watermark
// past them. The stream serves the text's 13 features and drops Budi's
// et-52 event; `reckon reconcile` computes the truth, and the curated
// features table (what the SQL endpoint's `features` view reads) holds,
// per event, served beside true: Budi's last 3 / 240,000 served and
// 4 / 590,000 true (differs), et 52 not served with its true figures,
// Dewi's and Siti's last exact. The reconciliation's report counts the
// same. The true figures the test expects are recounted here from the
// events, independently of the batch's fold.
func TestSeedFeaturesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	b, err := os.ReadFile("../testdata/features/seed000.json")
	if err != nil {
		t.Fatal(err)
	}
	var seed seedFeatures
	if err := json.Unmarshal(b, &seed); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rolling := time.Duration(seed.RollingSeconds) * time.Second
	st := newTruthStack(t, ctx, stackOptions{tweak: func(c *config.Config) {
		for i := range c.Streams {
			if s := &c.Streams[i]; s.Name == "payments" {
				s.Rolling, s.OutOfOrderness, s.AllowedLateness = rolling, time.Duration(seed.OOOSeconds)*time.Second, 0
				// The events come in one batch, but a loaded machine may
				// leave the partition idle between polls: the watermark
				// must follow the events only, as in the text.
				s.IdleTimeout = time.Hour
			}
		}
	}})
	pay, _ := st.cfg.StreamByName("payments")
	st.runStream(t, ctx)

	// 12:00 of the text is five minutes before now (whole seconds): every
	// event is in the past, so the gate's future skew never applies.
	base := time.Now().UTC().Add(-5 * time.Minute).Truncate(time.Second)
	ids := make([]string, len(seed.Events))
	var recs []*kgo.Record
	for i, e := range seed.Events {
		ids[i] = fmt.Sprintf("5eed0000-%04x-4000-8000-%012x", time.Now().Unix()&0xffff, i+1)
		recs = append(recs, seedRecord(pay, ids[i], base.Add(time.Duration(e.ET)*time.Second), e.User, e.Amount))
	}
	prod, err := kgo.NewClient(append(kafkaconn.Opts(st.cfg.Kafka, "seed"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// One event 200 s after 12:00 moves the watermark (and the purge) past
	// the text's events; its own window stays open, outside the check.
	push := seedRecord(pay, fmt.Sprintf("5eed0000-%04x-4000-8000-%012x", time.Now().Unix()&0xffff, 999),
		base.Add(200*time.Second), "push", 1)
	if err := prod.ProduceSync(ctx, push).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// What the stream served, as the features archive keeps it.
	served := map[string]lake.FeatureRow{}
	waitFor(t, 3*time.Minute, "the 13 served features archived", func() (bool, string) {
		rows, err := st.lk.ReadFeatures(ctx, "payments", base, base.Add(100*time.Second))
		if err != nil {
			return false, err.Error()
		}
		clear(served)
		for _, r := range rows {
			served[r.EventID] = r
		}
		return len(served) == 13, fmt.Sprintf("%d archived", len(served))
	})
	// The curation of the served rows (the archive's next step): a
	// recompute compares with the curated table.
	waitFor(t, 2*time.Minute, "the 13 served features curated", func() (bool, string) {
		rows, err := st.lk.ReadFeatureStatus(ctx, "payments", base, base.Add(100*time.Second))
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, r := range rows {
			if r.ServedCount != nil {
				n++
			}
		}
		return n == 13, fmt.Sprintf("%d curated", n)
	})
	// The truth, recounted from the events: every event of the user in
	// (et − 60 s, et], the dropped one included.
	type fig struct {
		count int64
		sum   float64
	}
	truth := make([]fig, len(seed.Events))
	for i, e := range seed.Events {
		for _, o := range seed.Events {
			if o.User == e.User && o.ET > e.ET-seed.RollingSeconds && o.ET <= e.ET {
				truth[i].count++
				truth[i].sum += o.Amount
			}
		}
	}
	var want activities.FeatureReport
	for i, e := range seed.Events {
		f, ok := served[ids[i]]
		switch {
		case e.Late:
			if ok {
				t.Errorf("et %d %s: served %d/%v, the text drops it", e.ET, e.User, f.Count, f.Sum)
			}
			want.NotServed++
		case !ok:
			t.Errorf("et %d %s: not served, the text serves %d/%v", e.ET, e.User, e.Served.Count, e.Served.Sum)
		case f.Count != e.Served.Count || f.Sum != e.Served.Sum:
			t.Errorf("et %d %s: served %d/%v, the text %d/%v", e.ET, e.User, f.Count, f.Sum, e.Served.Count, e.Served.Sum)
		case f.Count == truth[i].count && f.Sum == truth[i].sum:
			want.Exact++
		default:
			want.Differs++
		}
		want.Checked++
	}

	// The stream has purged the text's events: the reconciliation of today
	// so far covers them.
	view, err := newProgressView(st.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	lastEnd := base.Add(100 * time.Second)
	waitFor(t, 2*time.Minute, "payments purged through the text's events", func() (bool, string) {
		p := latestProgress(t, ctx, view, "payments", pay.Topic, 0)
		return !p.PurgedThrough.Before(lastEnd), "purged through " + p.PurgedThrough.Format(time.RFC3339)
	})
	var dates []string
	for _, e := range seed.Events {
		if d := base.Add(time.Duration(e.ET) * time.Second).Format(time.DateOnly); !slices.Contains(dates, d) {
			dates = append(dates, d)
		}
	}
	var got activities.FeatureReport
	for _, d := range dates {
		args := []string{"reconcile", "--date", d, "--wait"}
		for _, s := range append(st.sets, "batch.horizon_wait=3m") {
			args = append(args, "--set", s)
		}
		var out, errOut bytes.Buffer
		if code := Main(ctx, args, nil, &out, &errOut, nil); code != 0 {
			t.Fatalf("reckon reconcile --date %s: exit %d: %s\n%s", d, code, errOut.String(), out.String())
		}
		t.Logf("reckon reconcile --date %s --wait\n%s", d, out.String())
		if !strings.Contains(out.String(), "rolling features (served vs true)") {
			t.Errorf("reckon reconcile prints no feature report:\n%s", out.String())
		}
		b, err := st.lk.ReadReport(ctx, "reconcile", d)
		var rep activities.Report
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			t.Fatalf("report of %s: %v", d, err)
		}
		for _, p := range rep.Parts {
			if p.Stream == "payments" && p.Features != nil {
				got.Add(*p.Features)
			}
		}
	}
	if got.Checked != want.Checked || got.Exact != want.Exact || got.Differs != want.Differs || got.NotServed != want.NotServed {
		t.Errorf("report: %d checked, %d exact, %d differ, %d not served; want %d, %d, %d, %d",
			got.Checked, got.Exact, got.Differs, got.NotServed, want.Checked, want.Exact, want.Differs, want.NotServed)
	}

	// The curated features table, once the recompute's curation ran.
	status := map[string]lake.FeatureStatusRow{}
	waitFor(t, 2*time.Minute, "the features table to hold every event's truth", func() (bool, string) {
		rows, err := st.lk.ReadFeatureStatus(ctx, "payments", base, lastEnd)
		if err != nil {
			return false, err.Error()
		}
		clear(status)
		pending := 0
		for _, r := range rows {
			status[r.EventID] = r
			if r.Status == lake.FeaturePending {
				pending++
			}
		}
		return len(status) == len(seed.Events) && pending == 0, fmt.Sprintf("%d rows, %d pending", len(status), pending)
	})
	lastOf := map[string]int{}
	for i, e := range seed.Events {
		if j, ok := lastOf[e.User]; !ok || e.ET > seed.Events[j].ET {
			lastOf[e.User] = i
		}
	}
	for i, e := range seed.Events {
		r := status[ids[i]]
		wantStatus := lake.FeatureExact
		switch {
		case e.Late:
			wantStatus = lake.FeatureNotServed
		case e.Served.Count != truth[i].count || e.Served.Sum != truth[i].sum:
			wantStatus = lake.FeatureDiffers
		}
		if r.Status != wantStatus || r.TrueCount == nil || *r.TrueCount != truth[i].count || *r.TrueSum != truth[i].sum ||
			(r.ServedCount == nil) != e.Late || !e.Late && (*r.ServedCount != e.Served.Count || *r.ServedSum != e.Served.Sum) {
			t.Errorf("et %d %s: %s, want %s with true %d/%v (row %s)", e.ET, e.User, r.Status, wantStatus,
				truth[i].count, truth[i].sum, fmtStatusRow(r))
		}
	}
	// The text's closing table: each user's last event.
	for _, l := range seed.Last {
		r := status[ids[lastOf[l.User]]]
		ok := r.ServedCount != nil && r.TrueCount != nil && *r.ServedCount == l.Stream.Count && *r.ServedSum == l.Stream.Sum &&
			*r.TrueCount == l.Batch.Count && *r.TrueSum == l.Batch.Sum && (r.Status == lake.FeatureExact) == l.Match
		if !ok {
			t.Errorf("%s's last event: %s; the text: stream %d/%v, batch %d/%v, match %v",
				l.User, fmtStatusRow(r), l.Stream.Count, l.Stream.Sum, l.Batch.Count, l.Batch.Sum, l.Match)
		}
	}
	for i, e := range seed.Events {
		if e.Late {
			t.Logf("%s et %d (dropped by the stream): %s", e.User, e.ET, fmtStatusRow(status[ids[i]]))
		}
	}
	t.Logf("report: %+v", got)

	// reckon verify --features: every served feature once in the lake (the
	// 13 and the push event's), the curated table consistent with them,
	// every truth as an independent recount from the raw events says.
	vctx, vcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer vcancel()
	acc, err := verifyFeatures(vctx, st.cfg, st.lk)
	if err != nil {
		t.Fatal(err)
	}
	var b2 strings.Builder
	acc.print(&b2, st.cfg.Topics.Features)
	t.Log(b2.String())
	if !acc.ok() || acc.Records != 14 || acc.Rows != 14 || acc.Exact != want.Exact || acc.Differs != want.Differs ||
		acc.NotServed != want.NotServed || acc.Recounted != want.Checked {
		t.Errorf("verify --features: %+v; want 14 records and rows, %d exact, %d differ, %d not served",
			acc, want.Exact, want.Differs, want.NotServed)
	}
}

// seedRecord is a payments checkout of the seed on partition 0.
func seedRecord(s config.Stream, id string, at time.Time, user string, amount float64) *kgo.Record {
	v := fmt.Sprintf(`{"event_id":%q,"event_type":%q,"occurred_at":%q,"data":{%q:%q,%q:%v}}`,
		id, s.EventTypes[0], at.Format(time.RFC3339Nano), s.KeyField, user, s.ValueField, amount)
	return &kgo.Record{Topic: s.Topic, Partition: 0, Key: []byte(user), Value: []byte(v)}
}

func fmtStatusRow(r lake.FeatureStatusRow) string {
	f := func(c *int64, s *float64) string {
		if c == nil {
			return "-"
		}
		return fmt.Sprintf("%d/%v", *c, *s)
	}
	return fmt.Sprintf("%s served %s true %s %s", r.Key, f(r.ServedCount, r.ServedSum), f(r.TrueCount, r.TrueSum), r.Status)
}
