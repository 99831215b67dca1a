package lake

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"reckon/internal/event"
)

// TestFeaturesTable: features round-trip through the table, land per
// stream and UTC event date (a day's last and the next day's first event
// apart), rewriting a name with the same rows replaces the files without a
// second copy, ranges filter on event_time, and bad names are refused.
func TestFeaturesTable(t *testing.T) { forEachStore(t, testFeaturesTable) }

func testFeaturesTable(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	ctx := t.Context()
	d := time.Date(2026, 11, 7, 23, 59, 30, 0, time.UTC)
	var in []event.Feature
	for i := range 40 {
		stream := "payments"
		if i%4 == 3 {
			stream = "m8-suhu"
		}
		et := d.Add(time.Duration(i) * 1500 * time.Millisecond).Add(time.Duration(i) * time.Microsecond)
		f := event.Feature{Stream: stream, Key: fmt.Sprintf("u%d", i%5), EventID: fmt.Sprintf("e-%02d", i), EventTime: et,
			Size: time.Minute, Count: int64(i%7 + 1), Sum: float64(i) * 1000.25, Watermark: et.Add(-5 * time.Second),
			EmittedAt: et.Add(time.Second), ArrivedAt: et.Add(300 * time.Millisecond),
			SourceTopic: stream + "-kejadian", SourcePartition: int32(i % 3), SourceOffset: int64(1000 + i)}
		if i == 0 {
			f.Watermark = time.Time{} // before the partition's first event
		}
		in = append(in, f)
	}
	rows := func() []FeatureRow {
		out := make([]FeatureRow, len(in))
		for i, f := range in {
			out[len(in)-1-i] = FeatureRowOf(f, 2, int64(500+i)) // unordered: the writer sorts
		}
		return out
	}
	const name = "reckon-features-2-500-539"
	files, err := l.WriteFeatures(ctx, name, rows())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"features/stream=m8-suhu/event_date=2026-11-07/" + name + ".parquet",
		"features/stream=m8-suhu/event_date=2026-11-08/" + name + ".parquet",
		"features/stream=payments/event_date=2026-11-07/" + name + ".parquet",
		"features/stream=payments/event_date=2026-11-08/" + name + ".parquet",
	}
	var paths []string
	var total int64
	for _, f := range files {
		paths = append(paths, f.Path)
		total += f.Rows
	}
	if !slices.Equal(paths, want) || total != int64(len(in)) {
		t.Fatalf("files %v (%d rows), want %v (%d rows)", paths, total, want, len(in))
	}
	// A retried step writes the same rows under the same name again.
	if _, err := l.WriteFeatures(ctx, name, rows()); err != nil {
		t.Fatal(err)
	}
	streams, err := l.FeatureStreams(ctx)
	if err != nil || !slices.Equal(streams, []string{"m8-suhu", "payments"}) {
		t.Fatalf("streams %v, %v", streams, err)
	}
	got := map[string]FeatureRow{}
	for _, s := range streams {
		rs, err := l.ReadFeatures(ctx, s, d.Add(-time.Hour), d.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if _, dup := got[r.EventID]; dup {
				t.Fatalf("%s read twice", r.EventID)
			}
			got[r.EventID] = r
			if i > 0 && rs[i-1].EventTime/microsPerDay == r.EventTime/microsPerDay && compareFeatureRows(&rs[i-1], &r) > 0 {
				t.Errorf("%s: rows out of order at %d", s, i)
			}
		}
	}
	if len(got) != len(in) {
		t.Fatalf("read %d features, wrote %d", len(got), len(in))
	}
	for i, f := range in {
		r := got[f.EventID]
		if r.KafkaPartition != 2 || r.KafkaOffset != int64(500+i) {
			t.Errorf("%s at %d/%d, want 2/%d", f.EventID, r.KafkaPartition, r.KafkaOffset, 500+i)
		}
		if back := r.Feature(); !reflect.DeepEqual(back, f) {
			t.Errorf("round trip:\n got %+v\nwant %+v", back, f)
		}
	}
	// event_time ranges are half-open and cut inside a file.
	cut := d.Add(30 * time.Second) // 2026-11-08T00:00:00
	rs, err := l.ReadFeatures(ctx, "payments", d, cut)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range in {
		if f.Stream == "payments" && f.EventTime.Before(cut) {
			n++
		}
	}
	if len(rs) != n || n == 0 {
		t.Errorf("[%s, %s) read %d rows, want %d", d, cut, len(rs), n)
	}
	if _, err := l.WriteFeatures(ctx, "../x", rows()); !errors.Is(err, ErrBadName) {
		t.Errorf("bad file name: %v", err)
	}
	if _, err := l.WriteFeatures(ctx, "y", []FeatureRow{{Stream: "a/b"}}); !errors.Is(err, ErrBadName) {
		t.Errorf("bad stream name: %v", err)
	}
}

// TestStepIntent: an archive step's intent round-trips per partition, a
// later one replaces it, none reads as not ok, and the progress listing
// does not mistake it for a partition's progress.
func TestStepIntent(t *testing.T) { forEachStore(t, testStepIntent) }

func testStepIntent(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	ctx := t.Context()
	if _, ok, err := l.ReadStepIntent(ctx, "reckon-features", 1); ok || err != nil {
		t.Fatalf("no intent yet: ok %v, %v", ok, err)
	}
	for _, s := range []StepIntent{{"reckon-features", 1, 0, 40}, {"reckon-features", 1, 40, 90}, {"reckon-features", 0, 7, 8}} {
		if err := l.WriteStepIntent(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if s, ok, err := l.ReadStepIntent(ctx, "reckon-features", 1); !ok || err != nil || s != (StepIntent{"reckon-features", 1, 40, 90}) {
		t.Fatalf("intent %+v, %v, %v", s, ok, err)
	}
	if err := l.WriteStepIntent(ctx, StepIntent{"reckon-features", 1, 9, 8}); !errors.Is(err, ErrBadRange) {
		t.Errorf("backwards range: %v", err)
	}
	if _, err := l.WriteProgress(ctx, Progress{Topic: "reckon-features", Partition: 1, NextOffset: 40}); err != nil {
		t.Fatal(err)
	}
	ps, err := l.TopicProgress(ctx, "reckon-features")
	if err != nil || len(ps) != 1 || ps[0].NextOffset != 40 {
		t.Fatalf("progress %+v, %v", ps, err)
	}
}
