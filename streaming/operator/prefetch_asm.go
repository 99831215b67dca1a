//go:build amd64 || arm64

package operator

import "unsafe"

// prefetch asks the CPU to start loading the cache line at p, without
// waiting for it: the dedup index is far out of cache at a million ids, and
// its line can arrive while other work goes on. It is a hint; it never
// faults.
//
//go:noescape
func prefetch(p unsafe.Pointer)
