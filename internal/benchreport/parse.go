package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// result is one benchmark line of go test's output: a run of one
// benchmark (several with -count).
type result struct {
	// name is the benchmark's full name without the -GOMAXPROCS suffix
	// ("BenchmarkProcess/keyed=true/rate=1000k/s").
	name string
	// n is the iteration count.
	n int64
	// vals maps each unit ("ns/op", "B/op", "events/s") to its value.
	vals map[string]float64
}

var (
	// benchLine is a benchmark's name followed by its results, or by
	// whatever the benchmark printed before them.
	benchLine = regexp.MustCompile(`^(Benchmark\S+)\s+(.*)$`)
	// resultsPart is an iteration count and value-unit pairs.
	resultsPart = regexp.MustCompile(`^(\d+)((?:\s+[-+0-9.eE]+ \S+)+)\s*$`)
)

// parse reads go test -bench output and returns its results in order.
// go test prints a benchmark's name before running it and the figures
// after, so output the benchmark itself printed meanwhile (a log line)
// can come between the two: a name without figures waits for the next
// line that holds only figures. procs is the GOMAXPROCS suffix go test
// adds to names (none when 1).
func parse(r io.Reader, procs int) ([]result, error) {
	suffix := "-" + strconv.Itoa(procs)
	var out []result
	pending := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		rest := strings.TrimSpace(line)
		if m := benchLine.FindStringSubmatch(line); m != nil {
			name := m[1]
			if procs > 1 {
				name = strings.TrimSuffix(name, suffix)
			}
			pending, rest = name, m[2]
		}
		if pending == "" {
			continue
		}
		if res, ok := parseResults(pending, rest); ok {
			out = append(out, res)
			pending = ""
		}
	}
	return out, sc.Err()
}

// parseResults parses "N  v1 unit1  v2 unit2 …" as name's results.
func parseResults(name, s string) (result, bool) {
	m := resultsPart.FindStringSubmatch(s)
	if m == nil {
		return result{}, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return result{}, false
	}
	f := strings.Fields(m[2])
	res := result{name: name, n: n, vals: make(map[string]float64, len(f)/2)}
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return result{}, false
		}
		res.vals[f[i+1]] = v
	}
	return res, true
}
