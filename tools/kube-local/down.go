package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"
)

func runDown(args []string) int {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "data directory (required)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait before killing everything")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "down: --data-dir is required")
		return 2
	}
	l := layout{dir: *dataDir}
	pid := readPid(l.PidFile())
	if !alive(pid, "up") {
		// Nothing supervised; still clean up orphans of a crashed supervisor.
		killStale(l)
		_ = os.Remove(l.PidFile())
		fmt.Fprintf(os.Stderr, "down: nothing running for %s\n", *dataDir)
		return 0
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(*timeout)
	for time.Now().Before(deadline) {
		if !alive(pid, "up") {
			killStale(l)
			fmt.Fprintf(os.Stderr, "down: stopped (supervisor pid %d)\n", pid)
			return 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "down: supervisor %d still running after %s; killing\n", pid, *timeout)
	_ = syscall.Kill(-pid, syscall.SIGKILL) // its session/process group when detached
	_ = syscall.Kill(pid, syscall.SIGKILL)
	killStale(l)
	_ = os.Remove(l.PidFile())
	return 0
}
