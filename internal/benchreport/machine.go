package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// machine describes where the suite ran.
type machine struct {
	cpu        string // model name, from /proc/cpuinfo
	cores      int    // logical CPUs the Go runtime sees
	os         string // distribution and kernel
	goVersion  string // of the go command that runs the benchmarks
	commit     string // the tree's commit, "+ uncommitted changes" when dirty
	loadAtRun  float64
	memTotalGB float64
}

// describeMachine gathers what the page says about the machine. Anything
// it cannot find reads "unknown": the page is still worth having.
// page is the page being written, left out of the dirty check: the
// previous run rewrote it.
func describeMachine(ctx context.Context, goCmd, page string) machine {
	m := machine{cpu: "unknown", cores: runtime.NumCPU(), os: runtime.GOOS + "/" + runtime.GOARCH,
		goVersion: "unknown", commit: "unknown", loadAtRun: loadAverage()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.os = strings.Trim(v, `"`) + ", " + m.os
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "uname", "-sr").Output(); err == nil {
		m.os += ", " + strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, goCmd, "env", "GOVERSION", "GOOS", "GOARCH").Output(); err == nil {
		f := strings.Fields(string(out))
		if len(f) == 3 {
			m.goVersion = f[0] + " " + f[1] + "/" + f[2]
		}
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)"+page).Output(); err == nil && len(st) > 0 {
			m.commit += " + uncommitted changes"
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				m.memTotalGB = kb / (1 << 20)
			}
		}
	}
	return m
}

// loadAverage is the one-minute load average, -1 where /proc/loadavg is
// missing.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
