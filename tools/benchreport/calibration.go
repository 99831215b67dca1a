package benchreport

import (
	"fmt"
	"slices"
	"strings"
)

// The calibration (tools/calibrate, docs/adr/0042-benchmark-protocol.md):
// a fixed workload measured at several points across the run. Beside a
// goal the report shows the points nearest the goal's benchmark, each
// workload's figure as a multiple of the run's fastest point: near 1×
// the machine was as quick as it got during the run, so a goal missed
// there is the code's; well above 1× the machine was slow then.

const (
	pkgCalibrate = "reckon/tools/calibrate"
	calibBench   = "BenchmarkCalibrate/"
	// calibMetric is judged on CPU time, as the per-core goals are.
	calibMetric = "cpu-ns/op"
)

// calibWorkloads are tools/calibrate's sub-benchmarks, in report order.
var calibWorkloads = []string{"cpu", "ilp", "mem", "json"}

// calibPoint is one measurement of every workload, by the step that
// printed it.
type calibPoint struct {
	step int
	v    map[string]float64 // workload → cpu-ns/op
}

// calibPoints are the run's calibration points in step order, and each
// workload's fastest figure.
func (r *renderer) calibPoints() ([]calibPoint, map[string]float64) {
	byStep := map[int]*calibPoint{}
	best := map[string]float64{}
	for _, w := range calibWorkloads {
		b := r.run.Benchmark(pkgCalibrate + "." + calibBench + w)
		if b == nil {
			continue
		}
		r.used[b.ID()] = true
		for _, s := range b.Samples {
			v, ok := s.Values[calibMetric]
			if !ok || v <= 0 {
				continue
			}
			p := byStep[s.Step]
			if p == nil {
				p = &calibPoint{step: s.Step, v: map[string]float64{}}
				byStep[s.Step] = p
			}
			p.v[w] = v
			if b, ok := best[w]; !ok || v < b {
				best[w] = v
			}
		}
	}
	var pts []calibPoint
	for _, p := range byStep {
		pts = append(pts, *p)
	}
	slices.SortFunc(pts, func(a, b calibPoint) int { return a.step - b.step })
	return pts, best
}

// calibAround is the calibration beside a goal: the points just before
// and after the steps that produced f's samples, as multiples of the
// run's fastest ("cpu 1.00–1.04×, ilp 1.7–1.9×, …"); "—" without any.
func (r *renderer) calibAround(f Figure) string {
	pts, best := r.calibPoints()
	b := r.run.Benchmark(f.Bench)
	if len(pts) == 0 || b == nil {
		return "—"
	}
	near := map[int]bool{}
	for _, s := range b.Samples {
		before, after := -1, -1
		for i, p := range pts {
			if p.step <= s.Step {
				before = i
			} else if after < 0 {
				after = i
			}
		}
		for _, i := range []int{before, after} {
			if i >= 0 {
				near[i] = true
			}
		}
	}
	if len(near) == 0 {
		return "—"
	}
	var parts []string
	for _, w := range calibWorkloads {
		var xs []float64
		for i := range near {
			if v, ok := pts[i].v[w]; ok {
				xs = append(xs, v/best[w])
			}
		}
		if len(xs) == 0 {
			continue
		}
		lo, hi := slices.Min(xs), slices.Max(xs)
		if fmtRatio(lo) == fmtRatio(hi) {
			parts = append(parts, fmt.Sprintf("%s %s×", w, fmtRatio(lo)))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s–%s×", w, fmtRatio(lo), fmtRatio(hi)))
		}
	}
	return strings.Join(parts, ", ")
}

// calibration is the section listing every point.
func (r *renderer) calibration() {
	pts, best := r.calibPoints()
	if len(pts) == 0 {
		return
	}
	r.p("## Calibration\n\n")
	r.p("The fixed workload of `tools/calibrate` (cpu: one dependent multiply-add chain; ilp: eight independent ones; " +
		"mem: dependent random reads in 64 MiB; json: `encoding/json` decoding an event envelope), CPU time per op at each " +
		"point of the run, and as a multiple of the run's fastest point. The goals table shows the points around each goal's " +
		"benchmark: a goal missed beside figures near 1× is the code's; beside high ones, the machine was slow then " +
		"(docs/adr/0042-benchmark-protocol.md).\n\n")
	r.p("| point | after | %s |\n|---|---|%s\n", strings.Join(calibWorkloads, " | "), strings.Repeat("---|", len(calibWorkloads)))
	for i, p := range pts {
		after := "—"
		if p.step > 0 && p.step-1 < len(r.run.Steps) {
			after = "`" + escapeCell(truncate(stepName(r.run.Steps[p.step-1].Command), 60)) + "`"
		}
		at := ""
		if p.step >= 0 && p.step < len(r.run.Steps) && !r.run.Steps[p.step].Start.IsZero() {
			at = " " + r.run.Steps[p.step].Start.UTC().Format("15:04")
		}
		cells := make([]string, len(calibWorkloads))
		for j, w := range calibWorkloads {
			v, ok := p.v[w]
			if !ok {
				cells[j] = "—"
				continue
			}
			cells[j] = fmt.Sprintf("%s (%s×)", fmtValue("ns/op", v), fmtRatio(v/best[w]))
		}
		r.p("| %d%s | %s | %s |\n", i+1, at, after, strings.Join(cells, " | "))
	}
	r.p("\n")
}

// stepName shortens a step's command to what it benchmarks: the -bench
// pattern and the packages, or the command as it is.
func stepName(cmd string) string {
	f := strings.Fields(cmd)
	var bench, pkgs []string
	for i := 0; i < len(f); i++ {
		switch {
		case f[i] == "-bench" && i+1 < len(f):
			pat := strings.Trim(f[i+1], "'")
			if pat == "." {
				pat = "all"
			}
			bench = append(bench, pat)
			i++
		case strings.HasPrefix(f[i], "./"):
			pkgs = append(pkgs, f[i])
		}
	}
	if len(bench) == 0 {
		return cmd
	}
	return strings.Join(append(bench, pkgs...), " ")
}

// pointsOnce: the run's calibration points (calibPoints without the best).
func (r *renderer) pointsOnce() []calibPoint {
	pts, _ := r.calibPoints()
	return pts
}
