//go:build unix

package event

import "syscall"

// processCPU returns the user+system CPU time of this process in
// nanoseconds. Benchmarks report it per op beside wall time because CPU
// time is not inflated by waiting for a core on a shared machine.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
