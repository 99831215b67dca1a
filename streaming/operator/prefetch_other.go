//go:build !amd64 && !arm64

package operator

import "unsafe"

// prefetch is a no-op where reckon has no prefetch instruction wired up.
func prefetch(p unsafe.Pointer) {}
