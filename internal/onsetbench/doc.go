// Package onsetbench measures, live and end to end, how long a key that
// turns hot takes to be mitigated in an application: from the first event
// of the key produced to the moment a hotkeys.Follower reading the
// registry reports it hot (OnChange with StatusHot, IsHot true), with
// detect running in the same process at its default settings against a
// broker.
//
// The time splits in two. The rule window is the time the key needs to
// cross its rule's threshold at the rate it arrives at: from its first
// event to the event that crossed (the hot-key event's onset_ms). It is
// set by the rule (a 1,000/s rule over 1 s needs 1,000 events: half a
// second at 2,000/s), not by the machinery. Delivery is the rest: from
// the crossing event produced to detect's client fetching it, detect's
// core finding the key (detected_ms), the registry record acknowledged,
// the follower's client fetching it and its OnChange callback running.
//
// Everything here is in tests: BenchmarkOnsetToMitigation gives the
// figures (p50, p99, max of each part) and TestReportOnset checks that
// every planted key, and no background key, is reported hot. The
// campaigns run on the Kafka broker named by KEYHEAT_TEST_KAFKA (see
// package testenv) and on an in-process kfake cluster:
//
//	eval "$(scripts/services.sh env)"
//	go test -run '^$' -bench BenchmarkOnsetToMitigation -benchtime 1x -timeout 30m ./internal/onsetbench/
//	go test -v -run TestReportOnset ./internal/onsetbench/
//
// Times are this process's wall clock. An event's time is stamped when
// the generator hands it to its producer (which lingers 5 ms, as
// ingest's does), so the window share also holds whatever the generator
// fell behind before the crossing, and delivery the linger and the
// broker's acknowledgement; the log says how far the generator fell
// behind and at which of its events each key crossed.
package onsetbench
