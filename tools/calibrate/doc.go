// Package calibrate is a fixed workload that tells a slow machine from a
// regression (docs/adr/0042-benchmark-protocol.md): `make bench` measures
// it at several points across the run, and tools/benchreport shows the
// points nearest each goal's benchmark beside the goal, as multiples of
// the run's fastest point.
//
// The workloads do not change with reckon's code, so a figure of reckon
// that moves while the calibration beside it holds is the code; one that
// moves with the calibration is the machine. Each stresses a different
// part of a core, because load on a shared machine does not slow them
// alike (on hyperthread siblings `ilp` suffers where `cpu` barely moves):
//
//   - cpu: one dependent chain of integer multiply-adds (latency bound);
//   - ilp: eight independent chains (throughput bound: the execution
//     ports a sibling thread shares);
//   - mem: dependent random reads in 64 MiB (cache misses, memory latency);
//   - json: encoding/json decoding a fixed event envelope into a struct
//     (branches, allocation, the mix of a decoder).
//
// Run it as `make bench` does:
//
//	go test ./tools/calibrate -run '^$' -bench Calibrate -benchtime 200x -cpu 1
package calibrate
