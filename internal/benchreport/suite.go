package main

import "strings"

// getenv looks up an environment variable (os.Getenv, or a map in tests).
type getenv func(string) string

// figure is one section of the page: what it measures, the commands that
// measure it, and how their results become a table.
type figure struct {
	// id names the figure for -only.
	id    string
	title string
	// about says what is measured and how to read it (markdown).
	about string
	// needs are environment variables without which the figure is not
	// run (the page says which was missing).
	needs []string
	// runs are the commands, run in order.
	runs func(env getenv) []run
	// render returns the figure's table and any notes (markdown).
	render func(rs results, env getenv) string
}

const (
	envKafka      = "KEYHEAT_TEST_KAFKA"
	envClickHouse = "KEYHEAT_TEST_CLICKHOUSE"
)

// suite is every figure, in page order. Iteration counts are chosen so
// that the whole suite stays under ten minutes on two busy cores:
// counts ("3x") rather than durations where an iteration is long.
func suite() []figure {
	return []figure{coreFigure(), endToEndFigure(), latencyFigure(), memoryFigure(), archiveFigure(),
		clickHouseFigure(), mergeFigure(), clusterFigure(), callsFigure()}
}

func static(rs ...run) func(getenv) []run { return func(getenv) []run { return rs } }

func coreFigure() figure {
	const p = "BenchmarkProcess/"
	return figure{
		id:    "core",
		title: "Pipeline core: cost per event",
		about: "`Partition.Process` of one event on one partition (`pipeline.BenchmarkProcess`): the detection core " +
			"(rules, the slot Count-Min sketches, the HotRing), the window summaries (totals, top and big keys, distinct " +
			"keys, Redis slots) and the clock, windows acknowledged as they close, with `pipeline.DefaultOptions()`. " +
			"Keys are Zipf(1.1) over a million ids, one app, 9 reads to 1 write; every structure is filled before the " +
			"timer starts; the partition sees 100,000 events per second of event time. `BenchmarkBenchLoop` is the " +
			"loop that feeds the events, alone: the baseline of the same run, and \"net\" is the core's time above it.",
		runs: static(run{pkg: "./pipeline/", bench: "BenchmarkBenchLoop$|BenchmarkProcess$/./rate=100k$", benchtime: "1000000x", count: 2, benchmem: true}),
		render: func(rs results, _ getenv) string {
			t := table{head: []string{"input", "ns/event", "net of the loop", "B/event", "allocs/event"}}
			loop := rs.vals("BenchmarkBenchLoop", "ns/op")
			for _, c := range []struct{ name, label string }{
				{"keyed=true/rate=100k/s", "keyed topic"},
				{"keyed=false/rate=100k/s", "unkeyed topic"},
			} {
				ns := rs.vals(p+c.name, "ns/op")
				t.row(c.label, cell(ns, sig3), sig3(median(ns)-median(loop)),
					cell(rs.vals(p+c.name, "B/op"), sig3), cell(rs.vals(p+c.name, "allocs/op"), sig3))
			}
			t.row("the loop alone (baseline)", cell(loop, sig3), "", cell(rs.vals("BenchmarkBenchLoop", "B/op"), sig3),
				cell(rs.vals("BenchmarkBenchLoop", "allocs/op"), sig3))
			return t.String() + "\nTwo runs of each: the median, and the range in parentheses.\n"
		},
	}
}

func endToEndFigure() figure {
	return figure{
		id:    "endtoend",
		title: "End to end: detect next to raw franz-go",
		about: "`detect.BenchmarkEndToEnd`: a million events already on a 4-partition topic (keyed, 100,000 " +
			"distinct keys), read from the start by the whole service in batch mode (`ExitAtEnd`: decoding, detection, " +
			"window summaries through keyheat.windows, the merger, reports, commits) and, just before it in the same " +
			"run, by a franz-go group consumer that does nothing with the records: the floor any consumer pays. " +
			"Dense windows: 100,000 events per second of event time (10 one-second windows); sparse: 1,000 events/s " +
			"(1,000 windows: each costs a summary per partition and a merge, whatever its events). ns/event is the " +
			"run's wall time over its events, joining the groups included; CPU is the process's CPU time per event, " +
			"kfake's included (it runs in the process), the real broker's not. Read the ratios: on a shared machine " +
			"the wall-time ratio moves with how much of the cores each run got, the CPU ratio much less. The events " +
			"are in the binary codec, ingest's default, and in JSON (`events.codec: json`). On kfake, and on the real " +
			"broker too when " + envKafka + " is set.",
		runs: func(env getenv) []run {
			br := "kfake"
			if env(envKafka) != "" {
				br = "(kfake|kafka)"
			}
			return []run{{pkg: "./detect/", bench: "BenchmarkEndToEnd$/" + br + "$/rate=/codec=", benchtime: "1x"}}
		},
		render: func(rs results, env getenv) string {
			t := table{head: []string{"broker", "codec", "event time", "franz-go ns/event (CPU)", "detect ns/event (CPU)",
				"detect ÷ franz-go, wall", "detect ÷ franz-go, CPU"}}
			brokers := []struct{ name, label string }{{"kfake", "kfake, in the process"}, {"kafka", "Kafka (the real broker)"}}
			for _, br := range brokers {
				for _, codec := range []string{"binary", "json"} {
					for _, in := range []struct{ rate, label string }{
						{"100000", "dense: 100,000 events/s, 10 windows"}, {"1000", "sparse: 1,000 events/s, 1,000 windows"}} {
						base := "BenchmarkEndToEnd/" + br.name + "/rate=" + in.rate + "/codec=" + codec + "/"
						if !rs.has(base+"franz-go") && !rs.has(base+"detect") {
							continue
						}
						raw, det := rs.vals(base+"franz-go", "ns/event"), rs.vals(base+"detect", "ns/event")
						rawCPU, detCPU := rs.vals(base+"franz-go", "cpu-ns/event"), rs.vals(base+"detect", "cpu-ns/event")
						t.row(br.label, codec, in.label, cell(raw, sig3)+" ("+cell(rawCPU, sig3)+")", cell(det, sig3)+" ("+cell(detCPU, sig3)+")",
							ratio(det, raw), ratio(detCPU, rawCPU))
					}
				}
			}
			out := t.String()
			if env(envKafka) == "" {
				out += "\nThe real broker was not measured: " + envKafka + " was not set.\n"
			}
			return out
		},
	}
}

func latencyFigure() figure {
	return figure{
		id:    "latency",
		title: "Latency: onset to alert, onset to IsHot",
		about: "**Onset → alert** (`detect.BenchmarkAlertLatency`, background=100000/s): live, ingest's generator " +
			"produces Zipf(0.8) traffic over a million keys at 100,000 events/s to an in-process kfake broker (4 " +
			"partitions, keyed) while detect runs with its defaults; 200 planted keys turn hot, a new one every 100 ms, " +
			"each at 2,000 events/s for a second against the default rule's 1,000/s. The delay is `detected_ms − " +
			"onset_ms` of each hot-key event: from the event time of the event that crossed the rule to detect " +
			"publishing it (producing, fetching, detection, publishing; the generator stamps up to 1,024 events ahead " +
			"of the wall clock, so a delay can be slightly negative). It stamps event i with its start + i/rate: when it " +
			"cannot keep the rate (\"background reached\" below 100,000), its event times fall behind the wall clock " +
			"and every delay grows by that lag, which is the starved generator's, not detect's.\n\n" +
			"**Onset → IsHot** (`internal/onsetbench.BenchmarkOnsetToMitigation`, detect's defaults): from a planted " +
			"key's first event produced to a `hotkeys.Follower`'s OnChange reporting it hot (IsHot true), 100 planted " +
			"keys one every 500 ms, each at 2,000 events/s for 2 s, over 2,000 events/s of background on 8 " +
			"partitions. It splits into the rule window (first event → the event that crossed the rule: a 1,000/s rule " +
			"over 1 s needs 1,000 events, half a second at 2,000/s) and delivery (that event → OnChange: the broker, " +
			"detect, the registry topic, the follower). Against the real broker when " + envKafka + " is set, kfake " +
			"otherwise.",
		runs: func(env getenv) []run {
			br := "kfake"
			if env(envKafka) != "" {
				br = "kafka"
			}
			return []run{
				{pkg: "./detect/", bench: "BenchmarkAlertLatency$/background=100000/", benchtime: "1x"},
				{pkg: "./internal/onsetbench/", bench: "BenchmarkOnsetToMitigation$/broker=" + br + "$/detect=default$",
					benchtime: "1x", timeout: "30m"},
			}
		},
		render: func(rs results, env getenv) string {
			t := table{head: []string{"path", "broker", "p50", "p99", "keys"}}
			const al = "BenchmarkAlertLatency/background=100000/s"
			if rs.has(al) {
				t.row("onset → alert published", "kfake", cell(rs.vals(al, "p50-ms"), with(" ms")), cell(rs.vals(al, "p99-ms"), with(" ms")),
					cell(rs.vals(al, "alerts"), sig3)+" (background reached "+cell(rs.vals(al, "events/s"), sig3)+" events/s)")
			}
			for _, br := range []string{"kafka", "kfake"} {
				on := "BenchmarkOnsetToMitigation/broker=" + br + "/detect=default"
				if !rs.has(on) {
					continue
				}
				label := map[string]string{"kafka": "Kafka (real)", "kfake": "kfake"}[br]
				for _, part := range []struct{ unit, label string }{
					{"total", "onset → IsHot"}, {"window", "… of which the rule window"}, {"delivery", "… of which delivery"}} {
					t.row(part.label, label, cell(rs.vals(on, part.unit+"-p50-ms"), with(" ms")),
						cell(rs.vals(on, part.unit+"-p99-ms"), with(" ms")), cell(rs.vals(on, "onsets"), sig3))
				}
			}
			return t.String()
		},
	}
}

func memoryFigure() figure {
	const name = "BenchmarkMemoryDistinctKeys/"
	return figure{
		id:    "memory",
		title: "Memory against distinct keys",
		about: "`pipeline.BenchmarkMemoryDistinctKeys`: one partition with `pipeline.DefaultOptions()` counts " +
			"100,000 events per second of event time (one app, keyed) whose keys come in turn from 1,000 to " +
			"10,000,000 distinct keys; " +
			"after the last event, the heap the partition holds (the runtime's HeapInuse after a collection, less what " +
			"was in use before the partition was built) next to `Options.MemoryBound()`, the configuration's upper " +
			"bound per partition. The heap stops growing once the structures are full: it is bounded by the " +
			"configuration, not by the keys.",
		runs: static(run{pkg: "./pipeline/", bench: "BenchmarkMemoryDistinctKeys$", benchtime: "1x"}),
		render: func(rs results, _ getenv) string {
			t := table{head: []string{"distinct keys", "events", "heap in use after the run", "live heap", "MemoryBound", "in use ÷ bound"}}
			for _, c := range []struct{ distinct, events string }{
				{"1000", "1000000"}, {"10000", "1000000"}, {"100000", "1000000"}, {"1000000", "1000000"}, {"10000000", "10000000"}} {
				n := name + "distinct=" + c.distinct + "/events=" + c.events
				if !rs.has(n) {
					continue
				}
				in := rs.vals(n, "heap-inuse-MiB")
				t.row(commas(c.distinct), commas(c.events), cell(in, with(" MiB")), cell(rs.vals(n, "heap-live-MiB"), with(" MiB")),
					cell(rs.vals(n, "bound-MiB"), with(" MiB")), ratio(in, rs.vals(n, "bound-MiB")))
			}
			return t.String()
		},
	}
}

func archiveFigure() figure {
	return figure{
		id:    "archive",
		title: "Archive (Parquet): write and replay",
		about: "Write: `sink/archive.BenchmarkArchiveWrite` appends 1,048,576 access events (Zipf keys over a " +
			"million, one app, one hour) to one partition and flushes: buffering, sorting, zstd (the default level, " +
			"fastest), fsync and rename. Replay: `BenchmarkArchiveReplayMerge` reads eight partitions' files of the " +
			"same events back in event-time order (every event through the merge heap). `detect.BenchmarkReplay` " +
			"reads one archive (2M events, 8 partitions, 1M keys, 3 apps) three ways in one run: parquet-go's own " +
			"`GenericReader` (every row, no order: the baseline), keyheat's `EventReader` (merged in event-time " +
			"order), and `EventReader` feeding `detect.Replay` (partition cores and the merger, default rule). " +
			"Events per CPU second (user + system of the process) move less than events/s on a shared machine.",
		runs: static(
			run{pkg: "./sink/archive/", bench: "BenchmarkArchiveWrite/zstd=fastest$|BenchmarkArchiveReplayMerge$", benchtime: "2x", benchmem: true},
			run{pkg: "./detect/", bench: "BenchmarkReplay$", benchtime: "1x", benchmem: true},
		),
		render: func(rs results, _ getenv) string {
			t := table{head: []string{"what", "events/s", "events per CPU second", "÷ parquet-go, CPU", "bytes"}}
			w := "BenchmarkArchiveWrite/zstd=fastest"
			if rs.has(w) {
				t.row("archive write, one partition", cell(rs.vals(w, "events/s"), sig3), cell(rs.vals(w, "events/cpu-s"), sig3), "",
					cell(rs.vals(w, "B/event"), sig3)+" B/event on disk")
			}
			if m := "BenchmarkArchiveReplayMerge"; rs.has(m) {
				t.row("replay, 8 partitions merged in event-time order", cell(rs.vals(m, "events/s"), sig3),
					cell(rs.vals(m, "events/cpu-s"), sig3), "", cell(scale(rs.vals(m, "B/op"), 1e-6), sig3)+" MB allocated per replay")
			}
			base := rs.vals("BenchmarkReplay/parquet-go", "events/cpu-s")
			for _, c := range []struct{ name, label string }{
				{"parquet-go", "parquet-go `GenericReader`, same files (baseline)"},
				{"read", "keyheat `EventReader`, time-ordered"},
				{"read+detect", "`EventReader` + `detect.Replay`"},
			} {
				n := "BenchmarkReplay/" + c.name
				if !rs.has(n) {
					continue
				}
				t.row(c.label, cell(rs.vals(n, "events/s"), sig3), cell(rs.vals(n, "events/cpu-s"), sig3),
					ratio(rs.vals(n, "events/cpu-s"), base), cell(scale(rs.vals(n, "B/op"), 1e-6), sig3)+" MB allocated per 2M events")
			}
			return t.String()
		},
	}
}

func clickHouseFigure() figure {
	return figure{
		id:    "clickhouse",
		title: "ClickHouse insert throughput",
		about: "`sink/clickhouse.BenchmarkWriteReports` writes batches of report rows (window reports of about 33 " +
			"rows each: key lists, partitions, nodes, slots, advice and the report itself) through the sink's writer " +
			"to the real ClickHouse server at " + envClickHouse + " and waits for every acknowledgement: one " +
			"flusher, seven INSERTs per batch. A batch costs a fixed part (one part written per INSERT) plus a " +
			"part per row, so larger batches pay.",
		needs: []string{envClickHouse},
		runs:  static(run{pkg: "./sink/clickhouse/", bench: "BenchmarkWriteReports$", benchtime: "5x"}),
		render: func(rs results, _ getenv) string {
			t := table{head: []string{"batch", "rows/s", "ms per batch"}}
			for _, n := range []string{"1000", "10000"} {
				name := "BenchmarkWriteReports/rows=" + n
				if !rs.has(name) {
					continue
				}
				ms := rs.vals(name, "ns/op")
				for i := range ms {
					ms[i] /= 1e6
				}
				t.row(cell(rs.vals(name, "rows/batch"), sig3)+" rows", cell(rs.vals(name, "rows/s"), sig3), cell(ms, sig3))
			}
			return t.String()
		},
	}
}

func mergeFigure() figure {
	return figure{
		id:    "merge",
		title: "Merger: 1,000 partitions × top-1,024 per window",
		about: "`pipeline.BenchmarkMergePartitions`: the merger checks, decodes and folds one window's summaries " +
			"from 1,000 partitions, each listing 1,024 keys of one app (the top-K's capacity), into the cluster " +
			"report: keyed (every key on one partition, 1,024,000 distinct keys in the window) and not keyed " +
			"(overlapping keys, each partition with its Count-Min sketch). `BenchmarkMergeWindow` (add+merge) is " +
			"the same work for 8 partitions × 1,000 keys, measured in the same run: the ratio of the CPU time per " +
			"listed key says how the merger scales with partitions (1 is linear). With 1 s report windows, a " +
			"window that takes more than a second of CPU is one the merger cannot keep up with.",
		runs: static(run{pkg: "./pipeline/", bench: `BenchmarkMergeWindow$/./add\+merge$`, benchtime: "10x", benchmem: true},
			run{pkg: "./pipeline/", bench: `BenchmarkMergePartitions$`, benchtime: "1x", benchmem: true}),
		render: func(rs results, _ getenv) string {
			t := table{head: []string{"topic", "one window of", "ms per window", "CPU ms per window", "listed keys folded/s",
				"allocated per window", "CPU per key ÷ 8 partitions'"}}
			for _, k := range []string{"keyed", "unkeyed"} {
				small := "BenchmarkMergeWindow/" + k + "/add+merge"
				smallMs := scale(rs.vals(small, "µs/window"), 1e-3)
				smallCPU := scale(rs.vals(small, "cpu-µs/window"), 1e-3)
				if rs.has(small) {
					t.row(k, "8 partitions × 1,000 keys", cell(smallMs, sig3), cell(smallCPU, sig3),
						sig3(8000/(median(smallMs)/1000)), cell(scale(rs.vals(small, "B/op"), 1e-6), with(" MB")), "1 (baseline)")
				}
				n := "BenchmarkMergePartitions/partitions=1000/top=1024/" + k
				if rs.has(n) {
					ms := rs.vals(n, "ms/window")
					cpu := rs.vals(n, "cpu-ms/window")
					t.row(k, "1,000 partitions × 1,024 keys", cell(ms, sig3), cell(cpu, sig3),
						cell(rs.vals(n, "keys/s"), sig3), cell(scale(rs.vals(n, "B/op"), 1e-6), with(" MB")),
						ratio(scale(cpu, 1.0/1_024_000), scale(smallCPU, 1.0/8000)))
				}
			}
			return t.String()
		},
	}
}

func clusterFigure() figure {
	return figure{
		id:    "cluster",
		title: "A cluster: instances in one group",
		about: "`detect.BenchmarkCluster`: 1, 2, 5 and 10 detect instances, each a service with its own clients as " +
			"separate processes would have, join one group over a 100-partition topic on kfake; once the group gave " +
			"each of them partitions, a million keyed events (binary codec, 20,000 per second of event time: 50 " +
			"one-second windows) are produced, and the run ends when every window's cluster report is read, whole " +
			"(checked: no partition missing, the events summed exactly). Every instance shares this machine's cores, " +
			"so events/s cannot grow with instances here; what must not grow is the CPU per event, producing and " +
			"kfake included: the progress board, alignment and the merger's bookkeeping are what adding members costs.",
		runs: static(run{pkg: "./detect/", bench: `BenchmarkCluster$`, benchtime: "1x"}),
		render: func(rs results, _ getenv) string {
			t := table{head: []string{"instances", "events/s", "CPU ns/event", "CPU ÷ one instance's"}}
			one := rs.vals("BenchmarkCluster/instances=1", "cpu-ns/event")
			for _, n := range []string{"1", "2", "5", "10"} {
				name := "BenchmarkCluster/instances=" + n
				if !rs.has(name) {
					continue
				}
				cpu := rs.vals(name, "cpu-ns/event")
				t.row(n, cell(rs.vals(name, "events/s"), sig3), cell(cpu, sig3), ratio(cpu, one))
			}
			return t.String()
		},
	}
}

func callsFigure() figure {
	return figure{
		id:    "calls",
		title: "Per-call costs: hotkeys, sketches, HotRing",
		about: "What an application pays per call (`hotkeys`: `Follower.IsHot` on a registry of 1,000 " +
			"entries, a hot key and a key not hot; `Reporter.Record`, sequential and from every core at " +
			"once) and the building blocks' per-event costs (`sketch`: a Count-Min add, a top-K add on a Zipf stream; " +
			"`hotring`: a touch of a tracked key). The xxh3 hash alone (`sketch.BenchmarkHashBaseline`) is the " +
			"baseline of the same run for the sketches.",
		runs: static(
			run{pkg: "./hotkeys/", bench: "BenchmarkIsHot$/1k$/(hit|miss)$|BenchmarkRecord$", benchtime: "1000000x", benchmem: true},
			run{pkg: "./sketch/", bench: "BenchmarkHashBaseline$|BenchmarkCountMinAdd/4x2048$|BenchmarkTopKAdd/cap1024-4x2048$",
				benchtime: "2000000x", benchmem: true},
			run{pkg: "./hotring/", bench: "BenchmarkTouchExisting/window/bits=17/keys=1000$", benchtime: "2000000x", benchmem: true},
		),
		render: func(rs results, _ getenv) string {
			t := table{head: []string{"call", "ns/op", "÷ xxh3 alone", "allocs/op"}}
			hash := rs.vals("BenchmarkHashBaseline", "ns/op")
			for _, c := range []struct{ name, label string }{
				{"BenchmarkIsHot/1k/hit", "`Follower.IsHot`, hot key, 1k entries"},
				{"BenchmarkIsHot/1k/miss", "`Follower.IsHot`, key not hot, 1k entries"},
				{"BenchmarkRecord/Sequential", "`Reporter.Record`, one goroutine"},
				{"BenchmarkRecord/Parallel", "`Reporter.Record`, every core at once"},
				{"BenchmarkHashBaseline", "xxh3 of a key (baseline)"},
				{"BenchmarkCountMinAdd/4x2048", "`sketch.CountMin.Add`, 4×2048"},
				{"BenchmarkTopKAdd/cap1024-4x2048", "`sketch.TopK.Add`, capacity 1,024, Zipf"},
				{"BenchmarkTouchExisting/window/bits=17/keys=1000", "`hotring` Touch, tracked key, windowed"},
			} {
				if !rs.has(c.name) {
					continue
				}
				ns := rs.vals(c.name, "ns/op")
				r := ""
				if strings.HasPrefix(c.name, "BenchmarkCountMin") || strings.HasPrefix(c.name, "BenchmarkTopK") {
					r = ratio(ns, hash)
				}
				t.row(c.label, cell(ns, sig3), r, cell(rs.vals(c.name, "allocs/op"), sig3))
			}
			return t.String()
		},
	}
}

// scale returns vs each multiplied by f.
func scale(vs []float64, f float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v * f
	}
	return out
}

// commas writes a decimal integer with thousands separators.
func commas(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
