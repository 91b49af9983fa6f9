//go:build !linux

package backend

// Outside Linux a plugin's tree is its process group: a descendant that
// leaves the group (setsid) is not found.
func becomeSubreaper()              {}
func killTree(int)                  {}
func endOrphans(func(pid int) bool) {}
