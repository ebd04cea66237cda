package s3test

import "syscall"

// sysProcAttr makes the kernel kill the server if the test process dies
// without running its cleanups (a panic, a timeout, a SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
