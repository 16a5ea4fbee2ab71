//go:build linux

package controlplane

import (
	"os"
	"syscall"
)

// sysProcAttr puts the child in its own process group (so Stop can kill the
// group) and has the kernel SIGKILL it when this process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

func termGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGTERM) }
