// Command echo is the process the harness's own tests run: it says what
// it was given, then waits for its standard input to end and for SIGTERM.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	switch os.Getenv("ECHO_MODE") {
	case "partial":
		// A last line without its newline, then an exit.
		fmt.Fprint(os.Stdout, "no newline")
		return
	case "interleave":
		fmt.Fprintln(os.Stdout, "out 1")
		fmt.Fprintln(os.Stderr, "err 1")
		fmt.Fprintln(os.Stdout, "out 2")
		return
	case "fail":
		fmt.Fprintln(os.Stderr, "failing")
		os.Exit(7)
	}
	fmt.Fprintf(os.Stderr, "args %q\n", os.Args[1:])
	fmt.Fprintf(os.Stderr, "env ECHO_VALUE=%s\n", os.Getenv("ECHO_VALUE"))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Fprintf(os.Stdout, "stdin: %s\n", sc.Text())
	}
	fmt.Fprintln(os.Stdout, "stdin done")
	<-term
	fmt.Fprintln(os.Stderr, "stopping")
	os.Exit(3)
}
