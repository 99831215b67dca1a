package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"

	"reckon/internal/config"
	"reckon/internal/testing/s3test"
	"reckon/lake"
	"reckon/lake/storage"
)

// lakeMain runs `reckon lake <args>` through Main.
func lakeMain(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return lakeMainEnv(t, nil, stdin, args...)
}

// lakeMainEnv is lakeMain with RECKON_* variables in env.
func lakeMainEnv(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), append([]string{"lake"}, args...), strings.NewReader(stdin), &out, &errb, env)
	return code, out.String(), errb.String()
}

func mustLake(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	return mustLakeEnvIn(t, nil, stdin, args...)
}

func mustLakeEnv(t *testing.T, env []string, args ...string) string {
	t.Helper()
	return mustLakeEnvIn(t, env, "", args...)
}

func mustLakeEnvIn(t *testing.T, env []string, stdin string, args ...string) string {
	t.Helper()
	code, out, errs := lakeMainEnv(t, env, stdin, args...)
	if code != 0 {
		t.Fatalf("reckon lake %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func lakeLine(id int, occurred, arrived, key string, suhu string) string {
	env := fmt.Sprintf(`{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-%012d","event_type":"sensor.suhu.terbaca","occurred_at":%q,"data":{"id_perangkat":%q,"lantai":3,"suhu_c":%s}`, id, occurred, key, suhu)
	if arrived != "" {
		env += fmt.Sprintf(`,"arrived_at":%q`, arrived)
	}
	return env + "}"
}

// TestLakeWriteQueryCompact drives the lake commands end to end on a small
// hand-made file whose answers are known, on a lake directory and on an
// S3 lake (an in-process fake) configured through RECKON_LAKE_*.
func TestLakeWriteQueryCompact(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "lake")
		testLakeCommands(t, root, nil, func(key string) bool {
			_, err := os.Stat(filepath.Join(root, key))
			return err == nil
		})
	})
	t.Run("s3", func(t *testing.T) {
		backend := s3mem.New()
		if err := backend.CreateBucket("reckon-lake"); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
		t.Cleanup(srv.Close)
		testLakeCommandsS3(t, srv.URL, "reckon-lake", "prod", "reckon", "fake-secret", func(key string) bool {
			_, err := backend.HeadObject("reckon-lake", "prod/"+key)
			return err == nil
		})
	})
	// The same on a real S3 server (SeaweedFS; skipped without ./bin/weed
	// unless RECKON_TEST_REQUIRE_S3 is set).
	t.Run("s3-weed", func(t *testing.T) {
		srv, prefix := s3test.Server(t), s3test.Prefix(t)
		testLakeCommandsS3(t, srv.Endpoint, s3test.Bucket, prefix, srv.AccessKeyID, srv.SecretAccessKey, func(key string) bool {
			_, err := s3test.Client(t).StatObject(t.Context(), s3test.Bucket, prefix+"/"+key, minio.StatObjectOptions{})
			return err == nil
		})
	})
}

// testLakeCommandsS3 is testLakeCommands on s3://bucket/prefix at endpoint,
// configured through RECKON_LAKE_*, and the s3:// forms of --lake.
func testLakeCommandsS3(t *testing.T, endpoint, bucket, prefix, key, secret string, exists func(key string) bool) {
	root := "s3://" + bucket + "/" + prefix
	env := []string{"RECKON_LAKE_ROOT=" + root, "RECKON_LAKE_S3_ENDPOINT=" + endpoint, "RECKON_LAKE_S3_REGION=us-east-1",
		"RECKON_LAKE_S3_ACCESS_KEY_ID=" + key, "RECKON_LAKE_S3_SECRET_ACCESS_KEY=" + secret,
		"RECKON_LAKE_S3_ALLOW_PLAINTEXT_CREDENTIALS=true"}
	testLakeCommands(t, "", env, exists)
	if out := mustLakeEnv(t, env, "ls"); !strings.Contains(out, "lake "+root) {
		t.Errorf("ls header:\n%s", out)
	}
	// --lake names another prefix on the configured endpoint; without
	// the lake.s3 settings an s3:// root is refused.
	if code, _, errs := lakeMainEnv(t, env, "", "ls", "--lake", root+"-empty"); code != 0 {
		t.Errorf("ls of an empty prefix: exit %d: %s", code, errs)
	}
	if code, _, errs := lakeMain(t, "", "ls", "--lake", root); code != 1 || !strings.Contains(errs, "S3.Endpoint or S3.Region") {
		t.Errorf("s3:// root without lake.s3: exit %d: %s", code, errs)
	}
}

// testLakeCommands runs write, query, ls and compact on the lake at root
// (lake.root of env when empty); exists reports whether a lake file is
// there.
func testLakeCommands(t *testing.T, root string, env []string, exists func(key string) bool) {
	dir := t.TempDir()
	withRoot := func(args ...string) []string {
		if root != "" {
			args = append(args[:1:1], append([]string{"--lake", root}, args[1:]...)...)
		}
		return args
	}
	run := func(args ...string) string {
		t.Helper()
		return mustLakeEnv(t, env, withRoot(args...)...)
	}
	lines := []string{
		`garbage, not json`, // 1: rejected; takes line 2's arrival
		lakeLine(1, "2026-11-07T08:10:00Z", "2026-11-07T08:10:01Z", "sensor-07", "24.5"),
		lakeLine(2, "2026-11-07T08:20:00Z", "2026-11-07T08:20:01Z", "sensor-07", "26"),
		lakeLine(1, "2026-11-07T08:10:00Z", "2026-11-07T08:10:31Z", "sensor-07", "24.5"), // redelivery of 1
		lakeLine(3, "2026-11-07T08:09:59.999999Z", "", "sensor-01", "-3.5"),              // no arrived_at: takes line 4's
		lakeLine(4, "2026-11-07T09:00:00Z", "2026-11-07T09:00:02Z", "sensor-01", "75"),   // above max 60: rejected
		lakeLine(5, "2026-11-07T09:30:00Z", "2026-11-07T09:30:02Z", "sensor-01", "20.25"),
		"", // 8: an empty line is a record too, rejected
		lakeLine(6, "2026-11-07T08:40:00Z", "2026-11-07T09:40:00Z", "sensor-07", "25"), // late, same hour as 1, 2
	}
	input := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	topic := "m8-suhu-kejadian"
	// Two batches of 5 lines: files named by line ranges 1-5 and 6-9.
	out := run("write", "--topic", topic, "--input", input, "--batch", "5")
	if !strings.Contains(out, "9 lines -> 6 raw rows, 3 rejected") {
		t.Errorf("write summary:\n%s", out)
	}
	for _, f := range []string{
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=08/m8-suhu-kejadian-0-1-5.parquet",
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=08/m8-suhu-kejadian-0-6-9.parquet",
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=09/m8-suhu-kejadian-0-6-9.parquet",
		"rejected/topic=m8-suhu-kejadian/ingest_date=2026-11-07/m8-suhu-kejadian-0-1-5.parquet",
		"rejected/topic=m8-suhu-kejadian/ingest_date=2026-11-07/m8-suhu-kejadian-0-6-9.parquet",
	} {
		if !exists(f) {
			t.Errorf("missing %s", f)
		}
	}
	// The key and value paths come from the configured stream of the topic;
	// writing again is idempotent.
	run("write", "--topic", topic, "--key", "data.id_perangkat", "--value", "data.suhu_c", "--input", input, "--batch", "5")

	query := []string{"query", "--topic", topic, "--from", "2026-11-07T08:00:00Z", "--to", "2026-11-07T10:00:00Z"}
	got := run(append(query, "--format", "json")...)
	want := `{"key":"sensor-01","window_start":"2026-11-07T08:00:00Z","window_end":"2026-11-07T09:00:00Z","count":1,"sum":-3.5,"avg":-3.5,"min":-3.5,"max":-3.5}
{"key":"sensor-01","window_start":"2026-11-07T09:00:00Z","window_end":"2026-11-07T10:00:00Z","count":1,"sum":20.25,"avg":20.25,"min":20.25,"max":20.25}
{"key":"sensor-07","window_start":"2026-11-07T08:00:00Z","window_end":"2026-11-07T09:00:00Z","count":3,"sum":75.5,"avg":25.166666666666668,"min":24.5,"max":26}
`
	if got != want {
		t.Errorf("query json:\n%s\nwant:\n%s", got, want)
	}
	got = run(append(query, "--format", "csv", "--key", "sensor-07", "--window", "30m")...)
	want = "key,window_start,window_end,count,sum,avg,min,max\n" +
		"sensor-07,2026-11-07T08:00:00Z,2026-11-07T08:30:00Z,2,50.5,25.25,24.5,26\n" +
		"sensor-07,2026-11-07T08:30:00Z,2026-11-07T09:00:00Z,1,25,25,25,25\n"
	if got != want {
		t.Errorf("query csv:\n%s\nwant:\n%s", got, want)
	}
	got = run(query...)
	if !strings.HasPrefix(got, "KEY") || !strings.Contains(got, "WINDOW_START") || !strings.Contains(got, "AVG") || strings.Count(got, "\n") != 4 {
		t.Errorf("query table:\n%s", got)
	}

	var inv lake.Inventory
	if err := json.Unmarshal([]byte(run("ls", "--format", "json")), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.Tables) != 2 || inv.Tables[0].Rows != 6 || inv.Tables[0].Partitions != 2 || inv.Tables[0].Files != 3 || inv.Tables[1].Rows != 3 {
		t.Errorf("ls = %+v", inv.Tables)
	}
	// The rejected table's retention (lake.rejected_retention, default 7
	// days) is shown; raw is kept for ever.
	if len(inv.Tables) == 2 && (inv.Tables[1].Table != lake.RejectedDir || inv.Tables[1].Retention != "7d" || inv.Tables[0].Retention != "") {
		t.Errorf("ls retention: %+v", inv.Tables)
	}
	if len(inv.Progress) != 1 || inv.Progress[0].NextOffset != 10 {
		t.Errorf("progress = %+v", inv.Progress)
	}
	if out := run("ls"); !strings.Contains(out, "raw       m8-suhu-kejadian  2") || !strings.Contains(out, "RETENTION") ||
		!strings.Contains(out, "the compaction workflow deletes an ingest date 7d after its day") {
		t.Errorf("ls table:\n%s", out)
	}

	out = run("compact", "--topic", topic, "--date", "2026-11-07")
	// The redelivery of line 1 is dropped to raw_dropped/.
	if !strings.Contains(out, "event_hour=08/m8-suhu-kejadian-c1-0.parquet\t4 rows") || !strings.Contains(out, "1 redeliveries dropped") {
		t.Errorf("compact:\n%s", out)
	}
	for _, f := range []string{
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=08/m8-suhu-kejadian-c1-0.parquet",
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=09/m8-suhu-kejadian-c1-0.parquet",
		"raw_dropped/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=08/m8-suhu-kejadian-c1.parquet",
	} {
		if !exists(f) {
			t.Errorf("after compaction: missing %s", f)
		}
	}
	if exists("raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=08/m8-suhu-kejadian-0-1-5.parquet") {
		t.Error("after compaction: an input is still there")
	}
	if got := run(append(query, "--format", "json")...); !strings.Contains(got, `"count":3,"sum":75.5`) {
		t.Errorf("after compaction:\n%s", got)
	}
}

// TestLakeMatchesGeneratorTruth: the generator's manifest states the true
// hourly aggregates of its stream (duplicates, late events and poison
// included); `lake write` + `lake query` must reproduce them exactly.
func TestLakeMatchesGeneratorTruth(t *testing.T) {
	dir := t.TempDir()
	in, man, root := filepath.Join(dir, "gen.jsonl"), filepath.Join(dir, "manifest.json"), filepath.Join(dir, "lake")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"generate", "--scenario", "sensors", "--count", "3000", "--seed", "7", "--no-kafka", "--out", in, "--manifest", man}, strings.NewReader(""), &out, &errb, nil); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errb.String())
	}
	var m struct {
		Topic string `json:"topic"`
		Truth []struct {
			Stream      string  `json:"stream"`
			Key         string  `json:"key"`
			WindowStart string  `json:"window_start"`
			Count       int64   `json:"count"`
			Sum         float64 `json:"sum"`
			Min         float64 `json:"min"`
			Max         float64 `json:"max"`
		} `json:"truth"`
	}
	b, err := os.ReadFile(man)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	mustLake(t, "", "write", "--lake", root, "--topic", m.Topic, "--input", in)
	got := mustLake(t, "", "query", "--lake", root, "--topic", m.Topic, "--from", "2000-01-01", "--to", "2100-01-01", "--format", "json")
	var rows []lakeAggJSON
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		var r lakeAggJSON
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		rows = append(rows, r)
	}
	var want []lakeAggJSON
	for _, w := range m.Truth {
		if w.Stream == "suhu" {
			want = append(want, lakeAggJSON{Key: w.Key, WindowStart: w.WindowStart, Count: w.Count, Sum: w.Sum, Min: w.Min, Max: w.Max})
		}
	}
	if len(want) == 0 || len(rows) != len(want) {
		t.Fatalf("%d windows, manifest has %d", len(rows), len(want))
	}
	slices.SortFunc(want, func(a, b lakeAggJSON) int { return strings.Compare(a.Key+a.WindowStart, b.Key+b.WindowStart) })
	for i := range rows {
		g, w := rows[i], want[i]
		ws, _ := parseLakeTime(w.WindowStart)
		if g.Key != w.Key || g.WindowStart != lakeRFC3339(ws) || g.Count != w.Count || math.Abs(g.Sum-w.Sum) > 1e-6 || math.Abs(g.Avg-w.Sum/float64(w.Count)) > 1e-9 || g.Min != w.Min || g.Max != w.Max {
			t.Errorf("window %d = %+v, manifest %+v", i, g, w)
		}
	}
}

func TestLakeUsage(t *testing.T) {
	root := t.TempDir()
	for _, args := range [][]string{
		{},
		{"nope"},
		{"query", "--lake", root, "--from", "2026-11-07", "--to", "2026-11-08"},
		{"query", "--lake", root, "--topic", "t", "--from", "yesterday", "--to", "2026-11-08"},
		{"query", "--lake", root, "--topic", "t", "--from", "2026-11-07", "--to", "2026-11-08", "--format", "xml"},
		{"query", "--lake", root, "--topic", "t", "--from", "2026-11-07", "--to", "2026-11-08", "--window", "7m"},
		{"query", "--lake", root, "--topic", "../etc", "--from", "2026-11-07", "--to", "2026-11-08"},
		{"write", "--lake", root, "--topic", "t"},
		{"write", "--lake", root, "--topic", "no-stream-reads-me", "--input", "x.jsonl"},
		{"compact", "--lake", root, "--topic", "t"},
		{"ls", "--lake", root, "extra"},
	} {
		if code, _, errs := lakeMain(t, "", args...); code != 2 {
			t.Errorf("reckon lake %q: exit %d, want 2 (stderr %q)", args, code, errs)
		}
	}
	if code, out, _ := lakeMain(t, "", "ls", "--lake", filepath.Join(root, "missing")); code != 0 || !strings.Contains(out, "(empty)") {
		t.Errorf("ls of a missing lake: %d %q", code, out)
	}
}

// TestLakeOptionsFromConfig: lake.s3 maps onto lake.Options, with the
// secret key read from its file; a directory root takes nothing from it.
func TestLakeOptionsFromConfig(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "s3-secret")
	if err := os.WriteFile(secret, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("", []string{"RECKON_LAKE_ROOT=s3://reckon-lake/p", "RECKON_LAKE_S3_ENDPOINT=https://minio:9000",
		"RECKON_LAKE_S3_ACCESS_KEY_ID=id", "RECKON_LAKE_S3_SECRET_ACCESS_KEY_FILE=" + secret, "RECKON_LAKE_S3_SESSION_TOKEN=tok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := lakeOptions(cfg.Lake, "")
	if err != nil {
		t.Fatal(err)
	}
	want := storage.S3Options{Endpoint: "https://minio:9000", AccessKeyID: "id", SecretAccessKey: "from-file", SessionToken: "tok"}
	if opts.Root != "s3://reckon-lake/p" || opts.S3.String() != want.String() || opts.S3.SecretAccessKey != "from-file" || opts.S3.SessionToken != "tok" {
		t.Errorf("options = %v", opts)
	}
	if opts, err := lakeOptions(cfg.Lake, "/tmp/lake"); err != nil || opts.Root != "/tmp/lake" || opts.S3 != (storage.S3Options{}) {
		t.Errorf("--lake directory: %v, %v", opts, err)
	}
	os.Remove(secret)
	if _, err := openConfiguredLake(cfg, ""); err == nil || !strings.Contains(err.Error(), "secret_access_key_file") {
		t.Errorf("missing secret file: %v", err)
	}
}
