//go:build unix && !linux

package controlplane

import (
	"os"
	"syscall"
)

// sysProcAttr puts the child in its own process group so Stop can kill the
// group. Only Linux can tie the child's life to this process (Pdeathsig).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

func termGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGTERM) }
