// Package testlog collects what a worker under test logs, for assertions
// on its lines and for a failing test's output.
package testlog

import (
	"strings"
	"sync"
)

// Buffer collects log lines written by any number of goroutines; its zero
// value is ready to use.
type Buffer struct {
	mu sync.Mutex // protects b
	b  strings.Builder
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
