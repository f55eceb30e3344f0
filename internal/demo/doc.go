// Package demo is `detect demo`: an in-process Kafka broker (franz-go's
// kfake) on 127.0.0.1 that real clients can reach, synthetic traffic with
// planted hot keys (ingest's generator) produced into it, and a terminal
// View that follows the hot-key registry and the reports topic the way an
// application would (skipping tombstones and records it cannot decode).
//
// The detection itself is not here: the command runs the same detect
// service as `detect run` against the demo's broker, and calls Run once
// that service is built. Start checks the options and starts the broker;
// Run creates the events topic (the demo's input, which detect never
// creates), waits for the service to have joined its group, then
// generates events and draws the view until its context ends.
//
// Only the command imports it: an application follows the registry with
// package hotkeys, against the demo's broker like any other.
package demo
