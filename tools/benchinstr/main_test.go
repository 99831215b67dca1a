package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

func TestParseCollected(t *testing.T) {
	out := []byte("==15683== Callgrind, a call-graph generating cache profiler\n==15683== \n==15683== Events    : Ir\n" +
		"==15683== Collected : 52910138\n==15683== \n==15683== I   refs:      52,910,138\n")
	if n, err := ParseCollected(out); err != nil || n != 52910138 {
		t.Errorf("ParseCollected = %d, %v", n, err)
	}
	if _, err := ParseCollected([]byte("==1== I   refs: 5\n")); err == nil {
		t.Error("no Collected line: no error")
	}
}

func TestPerUnit(t *testing.T) {
	if v, err := PerUnit(1_000, 61_000, 1, 3, 10); err != nil || v != 3_000 {
		t.Errorf("PerUnit = %v, %v; want 3000", v, err)
	}
	if _, err := PerUnit(5, 5, 1, 3, 1); err == nil {
		t.Error("equal counts: no error")
	}
}

// TestMeasureCalibrationChain runs callgrind for real on the calibration
// workload's dependent chain: tools/calibrate's benchmark op is a million
// steps of multiply, add and the loop's own compare and branch, so ΔI/ΔN
// per step lies between 3 and 12 instructions whatever the machine does,
// while the process's setup (runtime start, the other workloads' tables
// are not built) cancels out.
func TestMeasureCalibrationChain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs valgrind")
	}
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		t.Skip("no valgrind on PATH")
	}
	exe := filepath.Join(t.TempDir(), "calibrate.test")
	if out, err := exec.Command("go", "test", "-c", "-o", exe, "../calibrate").CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	tg := Target{Name: "chain", Pkg: "../calibrate", Bench: "^BenchmarkCalibrate$/^cpu$", PerOp: 1_000_000, Unit: "instr/step", N1: 2, N2: 6}
	m, err := Measure(t.Context(), vg, exe, tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d and %d instructions: %.2f per step", m.I1, m.I2, m.PerUnit)
	if m.PerUnit < 3 || m.PerUnit > 12 {
		t.Errorf("%.2f instructions per chain step, want 3–12", m.PerUnit)
	}
}
