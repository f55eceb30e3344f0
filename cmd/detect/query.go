package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/spf13/cobra"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

func newQueryCmd(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "query top|skew|key KEY|alerts",
		Short: "Ask ClickHouse what was hot, where and when (the documented queries of docs/query.md)",
		Long: `query runs one of keyheat's documented ClickHouse queries (docs/query.md,
"Ask ClickHouse yourself" lists them) against the clickhouse: settings:

  top          the heaviest keys of the range (--list events|bytes|reads|writes|latency)
  skew         the most skewed windows: partition and node load, top-1 and top-10 share
  key KEY      one key's history, window by window: the most recent first
               (--order=busiest: the windows with the most events first)
  alerts       hot-key events (--key narrows them to one key)

The range is --since (back from now) or --from/--to; --app selects one app's
reports (the cluster's by default). Values are bound as parameters, never
pasted into the SQL.`,
		Example: `  detect query top --since=1h --app=shop
  detect query skew --from=2026-01-02T14:00:00Z --to=2026-01-02T14:10:00Z --json
  detect query key product:42 --since=30m
  detect query key product:42 --since=24h --order=busiest
  detect query alerts --since=24h --app=shop`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("name a query: top, skew, key KEY or alerts")
			}
			switch args[0] {
			case "top", "skew", "alerts":
				if len(args) != 1 {
					return fmt.Errorf("query %s takes no argument, got %q", args[0], args[1:])
				}
			case "key":
				if len(args) != 2 || args[1] == "" {
					return errors.New("query key takes the key: detect query key KEY")
				}
			default:
				return fmt.Errorf("unknown query %q: want top, skew, key KEY or alerts", args[0])
			}
			return nil
		},
	}
	f := c.Flags()
	f.Duration("since", time.Hour, "the range ends now and starts this long ago (ignored with --from)")
	f.String("from", "", "start of the range, an RFC 3339 time")
	f.String("to", "", "end of the range, an RFC 3339 time (default now)")
	f.String("app", "", "one app's reports; empty: the cluster's (alerts and key: every app)")
	f.String("key", "", "alerts: only this key's")
	f.String("list", "events", "top: rank by events, bytes, reads, writes or latency")
	f.Int("limit", 20, "rows at most")
	f.String("order", clickhouse.KeyOrderRecent, "key: which windows come first, and are kept under --limit: recent (the newest) or busiest (the most events)")
	f.Bool("json", false, "print the rows as JSON, one object a line")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		r, err := queryRange(cmd, time.Now())
		if err != nil {
			return err
		}
		order, _ := f.GetString("order")
		switch {
		case f.Changed("order") && args[0] != "key":
			return fmt.Errorf("--order orders query key's windows; query %s has its own order", args[0])
		case !slices.Contains(clickhouse.KeyOrders(), order):
			return fmt.Errorf("--order=%q: want %s", order, strings.Join(clickhouse.KeyOrders(), " or "))
		}
		file, _ := cmd.Flags().GetString("config")
		cfg, err := config.Load(config.CmdDetect, config.Source{File: file, Flags: cmd.Flags()})
		if err != nil {
			return err
		}
		cl, err := clickhouse.Connect(cmd.Context(), cfg.ClickHouse.Options)
		if err != nil {
			return fmt.Errorf("query: %w", serverError(err, cfg.ClickHouse.Database))
		}
		defer cl.Close()
		app, _ := f.GetString("app")
		limit, _ := f.GetInt("limit")
		asJSON, _ := f.GetBool("json")
		ctx := cmd.Context()
		var rows any
		var table func(*tabwriter.Writer)
		var note string // what the rows leave out, and how to see it
		switch args[0] {
		case "top":
			list, _ := f.GetString("list")
			rs, err := cl.Top(ctx, clickhouse.TopQuery{Range: r, App: app, List: list, Limit: limit})
			if err != nil {
				return err
			}
			rows, table = rs, func(w *tabwriter.Writer) { topTable(w, rs) }
		case "skew":
			rs, err := cl.Skew(ctx, clickhouse.ScopeQuery{Range: r, App: app, Limit: limit})
			if err != nil {
				return err
			}
			rows, table = rs, func(w *tabwriter.Writer) { skewTable(w, rs) }
		case "key":
			q := clickhouse.KeyQuery{Range: r, App: app, Key: args[1], Limit: limit, Order: order}
			rs, err := cl.Key(ctx, q)
			if err != nil {
				return err
			}
			rows, table = rs, func(w *tabwriter.Writer) { keyTable(w, rs) }
			if len(rs) > 0 && len(rs) >= effectiveLimit(limit) {
				total, err := cl.KeyWindows(ctx, q)
				if err != nil {
					return err
				}
				note = keyNote(len(rs), total, order)
			}
		case "alerts":
			key, _ := f.GetString("key")
			rs, err := cl.Alerts(ctx, clickhouse.AlertsQuery{Range: r, App: app, Key: key, Limit: limit})
			if err != nil {
				return err
			}
			rows, table = rs, func(w *tabwriter.Writer) { alertsTable(w, rs) }
		}
		if asJSON {
			// The note goes to standard error: standard output stays
			// JSON lines for a program to read.
			if note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			return writeJSONLines(stdout, rows)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		table(tw)
		if err := tw.Flush(); err != nil {
			return err
		}
		if note != "" {
			if _, err := fmt.Fprintln(stdout, note); err != nil {
				return err
			}
		}
		return nil
	}
	return c
}

// effectiveLimit is the row limit the queries apply for --limit.
func effectiveLimit(limit int) int {
	if limit <= 0 {
		return clickhouse.DefaultLimit
	}
	return limit
}

// keyNote says how many of the key's windows shown rows leave out, when
// any, and the flags that show them.
func keyNote(shown int, total uint64, order string) string {
	if total <= uint64(shown) {
		return ""
	}
	which, other := "the most recent first", "--order=busiest the busiest first"
	left := fmt.Sprintf("%d older ones", total-uint64(shown))
	if order == clickhouse.KeyOrderBusiest {
		which, other = "the busiest first", "--order=recent the most recent first"
		left = fmt.Sprintf("%d quieter ones", total-uint64(shown))
	}
	return fmt.Sprintf("%d of the key's %d windows in the range, %s; %s left out: --limit=%d shows them all, %s, --since or --from/--to another range.",
		shown, total, which, left, total, other)
}

// queryRange reads --since or --from/--to against nowMs.
func queryRange(cmd *cobra.Command, now time.Time) (clickhouse.Range, error) {
	f := cmd.Flags()
	since, _ := f.GetDuration("since")
	from, _ := f.GetString("from")
	to, _ := f.GetString("to")
	fromMs, err := parseTimeFlag("from", from)
	if err != nil {
		return clickhouse.Range{}, err
	}
	toMs, err := parseTimeFlag("to", to)
	if err != nil {
		return clickhouse.Range{}, err
	}
	r := clickhouse.Range{To: now}
	if to != "" {
		r.To = time.UnixMilli(toMs)
	}
	switch {
	case from != "":
		r.From = time.UnixMilli(fromMs)
	case f.Changed("since") && to != "":
		return r, errors.New("--since counts back from now; with --to, give --from")
	case since <= 0:
		return r, fmt.Errorf("--since=%v: want a positive duration such as 1h", since)
	default:
		r.From = now.Add(-since)
	}
	if !r.To.After(r.From) {
		return r, fmt.Errorf("--to (%s) must be after --from (%s)", r.To.UTC().Format(time.RFC3339), r.From.UTC().Format(time.RFC3339))
	}
	return r, nil
}

// writeJSONLines writes each element of rows, a slice, as one JSON line.
func writeJSONLines(w io.Writer, rows any) error {
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return err
	}
	for _, it := range items {
		if _, err := fmt.Fprintf(w, "%s\n", it); err != nil {
			return err
		}
	}
	return nil
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") }

func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" }

func topTable(w io.Writer, rs []clickhouse.TopRow) {
	fmt.Fprintln(w, "APP\tKEY\tEVENTS\t±ERR\tBYTES\tREADS\tWRITES\tSHARE\tWINDOWS\tFIRST\tLAST")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", r.App, r.Key, r.Events, r.Error, r.Bytes, r.Reads, r.Writes,
			pct(r.Share), r.Windows, msTime(r.FirstMs), msTime(r.LastMs))
	}
}

func skewTable(w io.Writer, rs []clickhouse.SkewRow) {
	fmt.Fprintln(w, "WINDOW\tEVENTS\tMAX/MEAN\tGINI\tNODE MAX/MEAN\tNODE GINI\tTOP1\tTOP10\tDISTINCT\tLATE\tMISSING")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%.3f\t%.2f\t%.3f\t%s\t%s\t%d\t%d\t%s\n", msTime(r.StartMs), r.Events, r.MaxMean, r.Gini,
			r.NodeMaxMean, r.NodeGini, pct(r.Top1Share), pct(r.Top10Share), r.DistinctKeys, r.Late, strings.Join(r.Missing, ","))
	}
}

func keyTable(w io.Writer, rs []clickhouse.KeyRow) {
	fmt.Fprintln(w, "WINDOW\tAPP\tRANK\tEVENTS\t±ERR\tBYTES\tREADS\tWRITES\tPARTITION\tSHARE")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", msTime(r.StartMs), r.App, r.Rank, r.Events, r.Error, r.Bytes,
			r.Reads, r.Writes, r.Partition, pct(r.Share))
	}
}

// alertsTable prints hot-key events: a hot's rate is at its crossing, an
// update's the key's current rate when it was decided (its onset is the
// hot's), PEAK/S the highest rate published in the episode so far ("-"
// on rows stored before updates existed).
func alertsTable(w io.Writer, rs []clickhouse.AlertRow) {
	fmt.Fprintln(w, "ONSET\tTYPE\tAPP\tKEY\tRULE\tRATE/S\tPEAK/S\tTHRESHOLD/S\tPARTITION\tADVICE")
	for _, r := range rs {
		advice := r.Mitigation
		if r.Split > 1 {
			advice += " x" + strconv.Itoa(int(r.Split))
		}
		peak := "-"
		if r.PeakRate > 0 {
			peak = strconv.FormatFloat(r.PeakRate, 'f', 1, 64)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%.1f\t%s/%d\t%s\n", msTime(r.OnsetMs), r.Type, r.App, r.Key, r.Rule, r.Rate,
			peak, r.Threshold, r.Topic, r.Partition, advice)
	}
}

// unknownDatabase is ClickHouse's error code UNKNOWN_DATABASE.
const unknownDatabase = 81

// serverError returns ClickHouse's own error when err carries one: the
// server answered, so the connection advice ("is it running?") that the
// error otherwise opens with is wrong and hides the cause.
func serverError(err error, database string) error {
	var (
		ex      *chgo.Exception
		refused *clickhouse.RefusedError
	)
	if errors.As(err, &refused) || !errors.As(err, &ex) {
		return err // a refusal names its setting already
	}
	if ex.Code == unknownDatabase {
		return fmt.Errorf("clickhouse database %s does not exist (%s): check clickhouse.database; detect run with clickhouse.enabled creates it", database, ex.Message)
	}
	return fmt.Errorf("clickhouse: %w", ex)
}
