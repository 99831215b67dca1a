package numfmt

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestFloat(t *testing.T) {
	for v, want := range map[float64]string{
		2.9745e+06: "2,974,500", 0: "0", -1234.5: "-1,234.5", 999: "999", 1000: "1,000",
		123456789.125: "123,456,789.125", 1e-7: "0.0000001", 1e21: "1,000,000,000,000,000,000,000",
		-0.5: "-0.5", 100000: "100,000",
	} {
		if got := Float(v); got != want {
			t.Errorf("Float(%v) = %q, want %q", v, got, want)
		}
	}
	if got := Float(math.NaN()); got != "NaN" {
		t.Errorf("Float(NaN) = %q", got)
	}
	if got := Fixed(2974500, 2); got != "2,974,500.00" {
		t.Errorf("Fixed = %q", got)
	}
	if got := Int(-1234567); got != "-1,234,567" {
		t.Errorf("Int = %q", got)
	}
}

// FuzzFloat: without its commas, Float's output parses back to the value.
func FuzzFloat(f *testing.F) {
	for _, v := range []float64{0, 2.9745e+06, -1e300, 5e-324, 123.456} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		s := Float(v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		if strings.ContainsAny(s, "eE") {
			t.Fatalf("Float(%v) = %q: not plain notation", v, s)
		}
		back, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
		if err != nil || back != v {
			t.Fatalf("Float(%v) = %q reads back as %v, %v", v, s, back, err)
		}
		for i, part := range strings.Split(strings.TrimPrefix(strings.SplitN(s, ".", 2)[0], "-"), ",") {
			if (i > 0 && len(part) != 3) || len(part) == 0 || len(part) > 3 {
				t.Fatalf("Float(%v) = %q: bad grouping", v, s)
			}
		}
	})
}
