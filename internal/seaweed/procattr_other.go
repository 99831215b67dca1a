//go:build !linux

package seaweed

import "syscall"

// procAttr puts weed in its own process group.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
