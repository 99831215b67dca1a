package lake

import (
	"os"
	"slices"
	"testing"
	"time"
)

// TestExpireRejected: of three rejected ingest dates, the one whose day
// ended more than the retention ago and whose files are as old is deleted;
// one as old by date but written recently (an archive catching up) and
// today's stay, and the raw table is not touched.
func TestExpireRejected(t *testing.T) {
	root := t.TempDir()
	l := mustOpen(t, Options{Root: root})
	w, err := l.NewRawWriter(RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, testGate(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	old, caughtUp := now.Add(-10*24*time.Hour), now.Add(-9*24*time.Hour)
	var recs []RawRecord
	for i, at := range []time.Time{old, caughtUp, now} {
		recs = append(recs, RawRecord{Offset: int64(2 * i), Timestamp: at, Value: []byte(`{not json`)},
			RawRecord{Offset: int64(2*i + 1), Timestamp: at, Value: envelope(i, "sensor.suhu.terbaca", at, `{"id_perangkat":"sensor-07","suhu_c":20}`)})
	}
	if _, err := w.WriteBatch(t.Context(), 0, recs); err != nil {
		t.Fatal(err)
	}
	oldFile := RejectedDateDir(root, topic, old) + "/" + FileName(topic, 0, 0, 5)
	if err := os.Chtimes(oldFile, old, old); err != nil {
		t.Fatal(err)
	}
	before := listFiles(t, l)

	if gone, err := l.ExpireRejected(t.Context(), topic, now, -1); err != nil || len(gone) != 0 {
		t.Fatalf("a negative retention deleted %v, %v", gone, err)
	}
	gone, err := l.ExpireRejected(t.Context(), topic, now, 7*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := rejectedDateKey(topic, old) + "/" + FileName(topic, 0, 0, 5)
	if !slices.Equal(gone, []string{want}) {
		t.Fatalf("deleted %v, want [%s]", gone, want)
	}
	after := listFiles(t, l)
	if got := slices.DeleteFunc(slices.Clone(before), func(f string) bool { return f == want }); !slices.Equal(after, got) {
		t.Errorf("files after expiry:\n%v\nwant\n%v", after, got)
	}
	if gone, err := l.ExpireRejected(t.Context(), topic, now, 7*24*time.Hour); err != nil || len(gone) != 0 {
		t.Errorf("a second pass deleted %v, %v", gone, err)
	}
}
