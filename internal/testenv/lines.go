package testenv

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
)

// Lines collects what a process writes to one of its streams, line by
// line, for a test to read while the process runs and to wait on.
// It is an io.Writer; exec.Cmd writes to it from a goroutine of its own.
type Lines struct {
	mu      sync.Mutex
	all     []string
	partial []byte        // the last line, until its newline comes
	added   chan struct{} // gets a value when a line is added
	closed  bool
}

func newLines() *Lines { return &Lines{added: make(chan struct{}, 1)} }

// Write adds p, a line to the lines when its newline comes.
func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	added := false
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, string(append(l.partial, p[:i]...)))
		l.partial = l.partial[:0]
		p = p[i+1:]
		added = true
	}
	l.partial = append(l.partial, p...)
	if added {
		l.notify()
	}
	return n, nil
}

// close ends the stream: a last line without a newline counts as a line.
func (l *Lines) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if len(l.partial) > 0 {
		l.all = append(l.all, string(l.partial))
		l.partial = nil
	}
	l.notify()
}

func (l *Lines) notify() {
	select {
	case l.added <- struct{}{}:
	default:
	}
}

// String returns the lines so far, joined by newlines.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.all, "\n")
	if len(l.partial) > 0 {
		if s != "" {
			s += "\n"
		}
		s += string(l.partial)
	}
	return s
}

// Match returns the lines so far that match re.
func (l *Lines) Match(re *regexp.Regexp) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.all {
		if re.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// Index returns the number (from 0) of the first line so far that
// matches re, or -1.
func (l *Lines) Index(re *regexp.Regexp) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.all {
		if re.MatchString(s) {
			return i
		}
	}
	return -1
}
