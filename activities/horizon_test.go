package activities_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/lake"
	"reckon/streaming/progress"
)

// TestCheckHorizon: a range is final when, on every non-empty partition of
// the stream's topic, the stream's published progress has purged through
// the range end and the lake holds what the stream counted up to its
// committed offset; progress with other window settings fails for good.
// Nothing else counts: no clock, no lake inference. Targeted mode waits
// for the too-late events' offsets only.
func TestCheckHorizon(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	st, _ := f.cfg.StreamByName("payments")
	end := t0.Add(15 * time.Minute)
	kopts, err := kafkaconn.Options(f.cfg.Kafka, "stream-progress")
	if err != nil {
		t.Fatal(err)
	}
	view, err := progress.NewView(progress.Options{Topic: f.cfg.Topics.StreamProgress, Kafka: kopts}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Close)
	f.a.Progress = view
	f.a.Now = func() time.Time { return end.Add(6 * time.Minute) }
	f.event(0, "u1", t0.Add(14*time.Minute), t0.Add(14*time.Minute), 1)
	f.event(1, "u2", t0.Add(10*time.Minute), t0.Add(10*time.Minute), 1)
	var recs []*kgo.Record
	for p := int32(0); p < 2; p++ {
		for _, r := range f.raw[p] {
			recs = append(recs, &kgo.Record{Topic: rawTopic, Partition: p, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		}
	}
	pc, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-p"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// publish commits progress records in one transaction, as the stream
	// worker does.
	tx, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-progress"), kgo.TransactionalID("test-progress"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	publish := func(ps ...event.StreamProgress) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			p.Format, p.Stream, p.Topic, p.PublishedAt = event.ProgressFormat, "payments", rawTopic, end.Add(5*time.Minute)
			if p.Settings == "" {
				p.Settings = st.SettingsDigest()
			}
			v, _ := json.Marshal(p)
			if err := tx.ProduceSync(context.Background(), &kgo.Record{Topic: f.cfg.Topics.StreamProgress, Key: []byte(p.Key()), Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	at := func(p int32, next int64, wm time.Time) event.StreamProgress {
		return event.StreamProgress{Partition: p, NextOffset: next, Watermark: wm, MaxEventTime: wm.Add(st.OutOfOrderness), PurgedThrough: wm.Add(-st.AllowedLateness)}
	}
	check := func(in activities.HorizonInput) activities.HorizonResult {
		t.Helper()
		r, err := run[activities.HorizonResult](t, f.a, f.a.CheckHorizon, in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	in := activities.HorizonInput{Stream: "payments", To: end}
	if r := check(in); r.Ready || strings.Count(r.Waiting, "has published no progress") != 2 || !slices.Equal(r.Causes, []string{activities.HorizonNoProgress, activities.HorizonNoProgress}) || !r.PurgeAt.Equal(end.Add(st.AllowedLateness)) {
		t.Fatalf("nothing published: %+v", r)
	}
	purge := end.Add(st.AllowedLateness)
	publish(at(0, 1, purge), at(1, 1, purge.Add(-time.Second)))
	r := check(in)
	if r.Ready || !strings.Contains(r.Waiting, rawTopic+"/1: watermark "+fmtTime(purge.Add(-time.Second))+" < "+
		fmtTime(purge)+" needed (last progress 1m0s ago)") ||
		!strings.Contains(r.Waiting, rawTopic+"/0: archived to offset 0, the range needs 1") ||
		!slices.Equal(slices.Sorted(slices.Values(r.Causes)), []string{activities.HorizonArchive, activities.HorizonWatermark}) ||
		len(r.Targets) != 1 || r.Targets[0].Partition != 0 || r.Targets[0].Offset != 1 {
		t.Fatalf("partition 1 not yet purged, partition 0 not yet archived: %+v", r)
	}
	in.Targets = r.Targets // the workflow keeps them
	publish(at(1, 1, purge))
	r = check(in)
	if r.Ready || strings.Contains(r.Waiting, "watermark") ||
		!strings.Contains(r.Waiting, rawTopic+"/1: archived to offset 0, the range needs 1") ||
		!slices.Equal(r.Causes, []string{activities.HorizonArchive, activities.HorizonArchive}) || len(r.Targets) != 2 {
		t.Fatalf("lake behind the stream: %+v", r)
	}
	in.Targets = r.Targets
	f.archive(t, t0.Add(time.Hour))
	if r := check(in); !r.Ready || r.Waiting != "" || len(r.Causes) != 0 || !r.PassedAt.Equal(end.Add(5*time.Minute)) {
		t.Fatalf("should be final: %+v", r)
	}
	// The stream goes on: its latest offset moves past the archive, the
	// range's captured targets do not. A check that had captured nothing
	// would chase the new offset.
	moved := purge.Add(time.Minute)
	publish(at(0, 7, moved), at(1, 7, moved))
	if r := check(in); !r.Ready {
		t.Fatalf("the captured targets were passed, the stream's new offset must not matter: %+v", r)
	}
	fresh := activities.HorizonInput{Stream: "payments", To: end}
	if r := check(fresh); r.Ready || !strings.Contains(r.Waiting, "archived to offset 1, the range needs 7") {
		t.Fatalf("a first check after the stream moved on captures its offset: %+v", r)
	}
	// The published progress going back behind a captured target is refused.
	publish(at(0, 1, purge.Add(-time.Minute)))
	_, err = run[activities.HorizonResult](t, f.a, f.a.CheckHorizon, in)
	if err == nil || !strings.Contains(err.Error(), activities.ErrTypeTruthProgressWentBack) {
		t.Fatalf("progress went back: %v", err)
	}
	publish(at(0, 7, moved))
	// An aborted transaction's progress is never seen.
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	bad := at(0, 0, purge.Add(-time.Hour))
	bad.Format, bad.Stream, bad.Topic, bad.Settings = 1, "payments", rawTopic, st.SettingsDigest()
	v, _ := json.Marshal(bad)
	rec := &kgo.Record{Topic: f.cfg.Topics.StreamProgress, Key: []byte(bad.Key()), Value: v}
	if err := tx.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if r := check(in); !r.Ready {
		t.Fatalf("an aborted progress record was read: %+v", r)
	}

	// Today so far: the check picks the latest window end every partition
	// has purged through and captures the targets for it.
	day := activities.HorizonInput{Stream: "payments", From: t0, To: t0.Add(24 * time.Hour), SoFar: true}
	r = check(day)
	if r.Ready || !r.To.Equal(end) || len(r.Targets) != 2 || r.Targets[1].Offset != 7 ||
		!strings.Contains(r.Waiting, "/1: archived to offset 1, the range needs 7") || r.StreamWaited {
		t.Fatalf("so far: windows to %s are final, waiting for the archive: %+v", fmtTime(end), r)
	}
	if r := check(activities.HorizonInput{Stream: "payments", From: end, To: day.To, SoFar: true}); r.Ready ||
		!r.To.IsZero() || !strings.Contains(r.Waiting, "no window from "+fmtTime(end)+" on is final yet") {
		t.Fatalf("so far, nothing final yet: %+v", r)
	}
	// Long poll: the check returns once the archive reaches the targets.
	day.WaitUpTo = 10 * time.Minute
	type answer struct {
		r   activities.HorizonResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := run[activities.HorizonResult](t, f.a, f.a.CheckHorizon, day)
		done <- answer{r, err}
	}()
	for p := int32(0); p < 2; p++ {
		lp := lake.Progress{Topic: rawTopic, Partition: p, NextOffset: 7, ArchivedThrough: t0.Add(3 * time.Hour)}
		if _, err := f.lk.WriteProgress(t.Context(), lp); err != nil {
			t.Fatal(err)
		}
	}
	// It waited for the archive only: the stream had passed before it looked.
	if a := <-done; a.err != nil || !a.r.Ready || !a.r.To.Equal(end) || a.r.StreamWaited {
		t.Fatalf("long poll: %+v %v", a.r, a.err)
	}
	// Other window settings: refused for good, not corrected with.
	other := at(1, 2, purge)
	other.Settings = "0123456789abcdef"
	publish(other)
	_, err = run[activities.HorizonResult](t, f.a, f.a.CheckHorizon, in)
	if err == nil || !strings.Contains(err.Error(), activities.ErrTypeTruthSettings) {
		t.Fatalf("settings mismatch: %v", err)
	}

	// Targeted: the lake must hold the late events' offsets.
	tin := activities.HorizonInput{Stream: "payments", To: end,
		After: []activities.PartitionOffset{{Partition: 0, Offset: 0}, {Partition: 1, Offset: 8}}}
	if r := check(tin); r.Ready || !strings.Contains(r.Waiting, "/1 archived to 7, need 9") || !slices.Equal(r.Causes, []string{activities.HorizonArchive}) {
		t.Fatalf("targeted: %+v", r)
	}
	if _, err := f.lk.WriteProgress(t.Context(), lake.Progress{Topic: rawTopic, Partition: 1, NextOffset: 9, ArchivedThrough: t0.Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r := check(tin); !r.Ready {
		t.Fatalf("targeted should be ready: %+v", r)
	}

	// Bad input fails for good.
	_, err = run[activities.HorizonResult](t, f.a, f.a.CheckHorizon, activities.HorizonInput{Stream: "nope", To: end})
	if err == nil || !strings.Contains(err.Error(), "unknown stream") {
		t.Fatalf("unknown stream: %v", err)
	}
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
