//go:build !unix

package operator

func cpuTime() int64 { return 0 }
