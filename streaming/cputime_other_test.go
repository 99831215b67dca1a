//go:build !unix

package streaming

func cpuTime() int64 { return 0 }
