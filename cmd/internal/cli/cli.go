// Package cli is the plumbing keyheat's commands share: the slog logger
// the log section configures, the HTTP endpoint serving Prometheus
// metrics and health checks, how an error is printed before a non-zero
// exit, what a stop says while it waits (SayWhileWaiting), and the
// commands' help: each lists the config keys it reads
// (Reads, SetupHelp), grouped by section, and --help-all every flag.
//
// It holds no command's logic and no configuration of its own; commands
// call it from main with what config.Load gave them.
package cli

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/keyheat/keyheat/config"
)

// NewLogger returns the logger c configures, writing to w (standard error
// in the commands). c is validated by config.Load.
func NewLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config.Load
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// PrintError prints err after "prog:", several problems (a config with
// more than one mistake) one per line, so a user fixes them in one pass.
func PrintError(w io.Writer, prog string, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 1 {
		fmt.Fprintf(w, "%s: %d problems:\n", prog, len(j.Unwrap()))
		for _, e := range j.Unwrap() {
			fmt.Fprintf(w, "  %v\n", e)
		}
		return
	}
	fmt.Fprintf(w, "%s: %v\n", prog, err)
}
