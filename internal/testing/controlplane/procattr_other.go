//go:build !unix

package controlplane

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) { _ = p.Kill() }

// termGroup kills: there is no SIGTERM here.
func termGroup(p *os.Process) { _ = p.Kill() }
