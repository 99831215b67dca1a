package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestHistogramText(t *testing.T) {
	r := NewRegistry()
	h := r.Histogram("x_seconds", "X.", []float64{1, 10}, "stream")
	h.With("a").Observe(0.5)
	h.With("a").Observe(1) // le is inclusive
	h.With("a").Observe(5)
	h.With("a").Observe(50)
	var b strings.Builder
	r.WriteText(&b)
	want := `# HELP x_seconds X.
# TYPE x_seconds histogram
x_seconds_bucket{stream="a",le="1"} 2
x_seconds_bucket{stream="a",le="10"} 3
x_seconds_bucket{stream="a",le="+Inf"} 4
x_seconds_sum{stream="a"} 56.5
x_seconds_count{stream="a"} 4
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if r.Histogram("x_seconds", "X.", nil, "stream") != h {
		t.Error("a second registration returned another family")
	}
}

func TestOnScrapeRunsBeforeEachScrape(t *testing.T) {
	r := NewRegistry()
	g := r.Gauge("scrapes", "Scrapes seen.")
	r.OnScrape(func(context.Context) { g.With().Add(1) })
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	for i, line := range []string{"scrapes 1", "scrapes 2"} {
		res, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(b), line+"\n") {
			t.Errorf("scrape %d: no %q in\n%s", i+1, line, b)
		}
	}
}

// TestFamilies lists every registered family with its type and labels,
// series or not.
func TestFamilies(t *testing.T) {
	r := NewRegistry()
	r.Gauge("b_gauge", "g", "topic", "partition")
	r.Counter("a_total", "c")
	r.Histogram("c_seconds", "h", []float64{1}, "stream")
	got := r.Families()
	want := []Family{
		{Name: "a_total", Type: "counter"},
		{Name: "b_gauge", Type: "gauge", Labels: []string{"topic", "partition"}},
		{Name: "c_seconds", Type: "histogram", Labels: []string{"stream"}},
	}
	if len(got) != len(want) {
		t.Fatalf("Families() = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Type != want[i].Type || !slices.Equal(got[i].Labels, want[i].Labels) {
			t.Errorf("family %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
