//go:build unix

package streaming

import "syscall"

// cpuTime is the process's user+system CPU time in ns. On a shared machine
// CPU time per event is a steadier measure of cost than wall time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
