package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/schemas"
)

// ViewConfig configures a View.
type ViewConfig struct {
	// ClientOpts connect to the brokers.
	ClientOpts []kgo.Opt
	// Hotkeys and Reports are the topics the view follows, from their start.
	Hotkeys, Reports string
	// Out receives the view.
	Out io.Writer
	// TTY redraws the view in place every Every; otherwise alerts are
	// printed as lines as they come and a report line every Every.
	TTY   bool
	Every time.Duration
	// Header is printed above the view (TTY) or once at the start.
	Header string
	// Top is how many keys the view lists.
	Top    int
	Logger *slog.Logger
}

// View shows what keyheat publishes, as an application would see it: it
// follows the hot-key registry and the reports topic like any other
// consumer, and draws the latest cluster report's top keys and skew with
// the recent alerts. The demo runs one on the terminal.
type View struct {
	cfg ViewConfig
	cl  *kgo.Client

	mu      sync.Mutex
	last    *schemas.WindowReport // latest cluster report
	reports int
	alerts  []string // recent alert lines, newest last
	nAlerts int
	printed int // alerts printed (plain mode)
}

const viewAlerts = 8

// NewView creates the view's consumer. It does not contact the brokers.
func NewView(cfg ViewConfig) (*View, error) {
	if cfg.Top <= 0 {
		cfg.Top = 10
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	opts := append([]kgo.Opt{}, cfg.ClientOpts...)
	opts = append(opts, kgo.ConsumeTopics(cfg.Hotkeys, cfg.Reports), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("view: kafka client: %w", err)
	}
	return &View{cfg: cfg, cl: cl}, nil
}

// Run follows the topics and draws until ctx ends.
func (v *View) Run(ctx context.Context) error {
	defer v.cl.Close()
	if !v.cfg.TTY && v.cfg.Header != "" {
		fmt.Fprintln(v.cfg.Out, v.cfg.Header)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(v.cfg.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				v.draw()
			}
		}
	}()
	for ctx.Err() == nil {
		fs := v.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				v.cfg.Logger.Warn("view fetch", "topic", t, "partition", p, "err", err)
			}
		})
		fs.EachRecord(v.record)
		if !v.cfg.TTY {
			v.printAlerts()
		}
	}
	<-done
	return nil
}

func (v *View) record(r *kgo.Record) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch r.Topic {
	case v.cfg.Hotkeys:
		if r.Value == nil {
			return // a tombstone: a cooled key leaving the registry (its cooled came before)
		}
		h, err := schemas.DecodeHotKeyEvent(r.Value)
		if err != nil {
			return // not a detector record (a manual entry, "m:…"), or of a format this view does not know
		}
		v.alerts = append(v.alerts, string(detect.AppendHotKeyText(nil, h)))
		v.nAlerts++
		if len(v.alerts) > 4*viewAlerts {
			v.printed -= len(v.alerts) - viewAlerts
			v.alerts = append(v.alerts[:0], v.alerts[len(v.alerts)-viewAlerts:]...)
		}
	case v.cfg.Reports:
		rep, err := schemas.DecodeWindowReport(r.Value)
		if err != nil || rep.Scope != schemas.ScopeCluster {
			return
		}
		if v.last == nil || rep.StartMs >= v.last.StartMs {
			v.last = rep
		}
		v.reports++
	}
}

// printAlerts prints, in plain mode, the alerts not printed yet.
func (v *View) printAlerts() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, a := range v.alerts[max(0, v.printed):] {
		fmt.Fprintln(v.cfg.Out, a)
	}
	v.printed = len(v.alerts)
}

func (v *View) draw() {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b strings.Builder
	if !v.cfg.TTY {
		if v.last != nil {
			b.WriteString(v.summaryLine())
			b.WriteByte('\n')
		}
		_, _ = io.WriteString(v.cfg.Out, b.String())
		return
	}
	b.WriteString("\x1b[H\x1b[2J") // home, clear
	b.WriteString(v.cfg.Header)
	b.WriteString("\n\n")
	if v.last == nil {
		b.WriteString("waiting for the first window report (a window closes once the watermark passes it)…\n")
	} else {
		r := v.last
		fmt.Fprintf(&b, "window %s  events %d  distinct %d  late %d  partitions max/mean %.2f  gini %.2f  top-1 %.1f%%  top-10 %.1f%%\n\n",
			time.UnixMilli(r.StartMs).UTC().Format("15:04:05"), r.Events, r.Distinct, r.Late, r.Skew.MaxMean, r.Skew.Gini,
			100*r.Skew.Top1Share, 100*r.Skew.Top10Share)
		fmt.Fprintf(&b, "  %3s  %-28s %10s %7s  %s\n", "#", "key", "events", "share", "partition")
		for i, k := range r.Top {
			if i == v.cfg.Top {
				break
			}
			fmt.Fprintf(&b, "  %3d  %-28s %10d %6.1f%%  %d\n", i+1, clip(k.App+" "+k.Key, 28), k.Count, 100*k.Share, k.Partition)
		}
	}
	fmt.Fprintf(&b, "\nhot-key events: %d (latest last)\n", v.nAlerts)
	for _, a := range v.alerts[max(0, len(v.alerts)-viewAlerts):] {
		b.WriteString("  ")
		b.WriteString(a)
		b.WriteByte('\n')
	}
	_, _ = io.WriteString(v.cfg.Out, b.String())
}

// summaryLine is the plain-mode line of the latest report; its top keys
// read app/key.
func (v *View) summaryLine() string {
	r := v.last
	var b strings.Builder
	fmt.Fprintf(&b, "%s window events=%d distinct=%d max/mean=%.2f gini=%.2f top:",
		time.UnixMilli(r.StartMs).UTC().Format("15:04:05"), r.Events, r.Distinct, r.Skew.MaxMean, r.Skew.Gini)
	for i, k := range r.Top {
		if i == min(v.cfg.Top, 5) {
			break
		}
		fmt.Fprintf(&b, " %s/%s %.1f%%", k.App, k.Key, 100*k.Share) // two apps may share key names
	}
	return b.String()
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
