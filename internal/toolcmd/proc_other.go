//go:build !linux

package toolcmd

import "syscall"

// dieWithParent: no parent-death signal outside Linux; the child ends when
// evalrun is interrupted (Exec's ctx), not when it is killed.
func dieWithParent() *syscall.SysProcAttr { return nil }
