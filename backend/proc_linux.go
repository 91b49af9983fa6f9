package backend

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// setPdeathsig makes the kernel SIGKILL the plugin when the OS thread that
// started it exits (Launch keeps that thread alive for the plugin's life).
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// peakRSS reads VmHWM, the peak resident set size, of a process.
func peakRSS(pid int) (int64, bool) { return procStatusBytes(strconv.Itoa(pid), "VmHWM:") }

// ResidentBytes is this process's resident set size (VmRSS, mapped weights
// included): what a plugin reports as LoadResult.MemoryBytes. 0 where it is
// not measured (outside Linux).
func ResidentBytes() int64 {
	n, _ := procStatusBytes("self", "VmRSS:")
	return n
}

// procStatusBytes reads a "KEY: N kB" line of /proc/PID/status.
func procStatusBytes(pid, key string) (int64, bool) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return kb << 10, true
				}
			}
		}
	}
	return 0, false
}
