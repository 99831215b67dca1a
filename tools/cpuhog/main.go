// Command cpuhog keeps CPUs busy until it is killed, so tests can be
// proven on a loaded machine (make test-loaded).
//
//	cpuhog [-n goroutines]   // default: one per CPU
package main

import (
	"flag"
	"runtime"
)

func main() {
	n := flag.Int("n", runtime.NumCPU(), "busy goroutines")
	flag.Parse()
	for i := 0; i < *n; i++ {
		go func() {
			for { // busy: the point of the program
			}
		}()
	}
	select {}
}
