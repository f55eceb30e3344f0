// Package reload keeps a running detect service's rules in step with its
// configuration file: it watches the file (Watch) and, each time its
// content changes, loads it the way the command did at start
// (config.Load) and hands the new pipeline options to the service
// (detect.Service.Reload), which swaps the rules in between two events.
//
// The policy is what to apply and what to keep. A file that loads with
// an error, or that the service refuses (a change to anything but the
// rules, whitelist and operation lists), is logged at ERROR and the rules
// in force stay. So does a file that names nothing (empty, or comments
// only), or one that lost the pipeline.rules it had when last read: such
// a file loads without error, the default rule filling in, but it is
// almost always a file caught half-written (an editor or a deploy that
// truncates before it writes, `: > file`), and applying it would replace
// every configured rule with the default one and silence their alerts.
// To drop every rule, write "rules: []". An applied file is logged at
// INFO with how many rules and whitelist entries are in force.
//
// It owns neither the configuration's keys (package config) nor the
// rules' meaning (package pipeline); the service counts reloads in its
// own metrics (keyheat_detect_rule_reloads_total).
package reload
