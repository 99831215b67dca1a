package activities

import (
	"reflect"
	"strings"
	"testing"

	"reckon/internal/testing/corrupt"
	"reckon/lake"
	"reckon/zreport"
)

// FuzzCorruptZReportFile: a Z-report version file corrupted in the lake
// (bytes flipped at pos, or cut short by cut bytes) read back by
// LoadZReport's reader. It must never panic; a failing read names the
// file; a read that succeeds returns exactly the version written, never
// another.
//
//	go test ./activities -run '^$' -fuzz '^FuzzCorruptZReportFile$' -fuzztime 60s
func FuzzCorruptZReportFile(f *testing.F) {
	f.Add(uint32(0), byte(0), uint32(0))
	f.Add(uint32(0), byte(0xff), uint32(0))
	f.Add(uint32(60), byte(0x04), uint32(0))
	f.Add(uint32(0), byte(0), uint32(1))
	f.Add(uint32(0), byte(0), uint32(100))
	f.Add(^uint32(0)-40, byte(0x20), uint32(0))
	dir := f.TempDir()
	lk, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		f.Fatal(err)
	}
	s := zreport.New(zkey, zreport.Policy{})
	s.Apply(zpart(zreport.OFD, "o", 5, 50.5), zclosed)
	s.Apply(zpart(zreport.DWH, "d", 5, 50.5), zclosed)
	out, _ := s.Apply(zpart(zreport.RMS, "r", 5, 50.5), zclosed)
	if out.Final == nil {
		f.Fatal("no final version")
	}
	key, err := writeZReportFile(f.Context(), lk, out.Final)
	if err != nil {
		f.Fatal(err)
	}
	want, err := readZReportFile(f.Context(), lk, key)
	if err != nil {
		f.Fatal(err)
	}
	orig := corrupt.Read(f, dir, key)
	f.Fuzz(func(t *testing.T, pos uint32, flip byte, cut uint32) {
		n := uint32(len(orig))
		root := corrupt.Root(t, key, corrupt.Bytes(orig, pos, flip, cut))
		l, err := lake.Open(lake.Options{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readZReportFile(t.Context(), l, key)
		if err != nil {
			if !strings.Contains(err.Error(), key) {
				t.Fatalf("reading a corrupt Z-report file: %v: does not name %s", err, key)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("a file corrupted at %d (^%#x, cut %d) read back as another version without an error:\n got %+v\nwant %+v", pos%n, flip, cut%n, got, want)
		}
	})
}
