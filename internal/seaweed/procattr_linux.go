package seaweed

import "syscall"

// procAttr puts weed in its own process group and kills it when the
// process that started it dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
