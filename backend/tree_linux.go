package backend

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A plugin's process tree on Linux: its process group (killed with it) and
// every descendant that left the group (setsid, setpgid), found through
// /proc while the plugin lives and, once it has died, among the orphans the
// host inherits as a child subreaper.

var subreaperOnce sync.Once

// becomeSubreaper makes this process the parent of its plugins' orphans
// (PR_SET_CHILD_SUBREAPER) instead of init, so that endOrphans can find
// them after their plugin died.
func becomeSubreaper() {
	subreaperOnce.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct{ pid, ppid, pgid, sid int }

// allProcs lists the processes /proc shows.
func allProcs() []procStat {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range d {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...: comm may hold spaces and ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		sid, _ := strconv.Atoi(f[3])
		out = append(out, procStat{pid, ppid, pgid, sid})
	}
	return out
}

// descendants lists every process below root.
func descendants(root int) []int {
	children := map[int][]int{}
	for _, p := range allProcs() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// killTree stops and then kills every descendant of root outside its
// process group (the group itself is killed by the caller): stopped first,
// so none can start another between the listing and the kill.
func killTree(root int) {
	seen := map[int]bool{}
	for range 3 { // a stopped process starts nothing; a few passes catch the forks in flight
		fresh := 0
		for _, pid := range descendants(root) {
			if !seen[pid] {
				seen[pid] = true
				fresh++
				_ = syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
		if fresh == 0 {
			break
		}
	}
	for pid := range seen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// endOrphans kills and reaps the orphans this process inherited as a
// subreaper: its children that no Launch started and that live in a session
// or process group of their own (a plugin's, or one a plugin's descendant
// made with setsid). Children the host started itself share its group.
func endOrphans(launched func(pid int) bool) {
	self, ownGroup := os.Getpid(), syscall.Getpgrp()
	for _, p := range allProcs() {
		if p.ppid != self || launched(p.pid) || p.pgid == ownGroup {
			continue
		}
		for _, d := range descendants(p.pid) {
			_ = syscall.Kill(d, syscall.SIGKILL)
		}
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(p.pid, &ws, 0, nil)
	}
}
