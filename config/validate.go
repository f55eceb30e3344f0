package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// FieldError is one problem with one configuration key. Validate returns
// all of them joined, so a user fixes a file in one pass.
type FieldError struct {
	// Key is the dotted key as written in the file, e.g. kafka.brokers.
	Key string
	// Problem says what is wrong and, where it can, what is allowed.
	Problem string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Problem }

// problems collects FieldErrors.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &FieldError{Key: key, Problem: fmt.Sprintf(format, args...)})
}

func (p problems) err() error { return errors.Join(p...) }

// Validate checks c and returns every problem found, each a *FieldError
// naming its key, joined with errors.Join; nil when c is usable.
func (c *Config) Validate() error {
	var p problems
	c.Log.validate(&p)
	c.Kafka.validate(&p)
	c.ClickHouse.validate(&p)
	c.Events.validate(&p)
	c.Ingest.validate(&p, &c.Kafka.Topics)
	if c.Metrics.Addr != "" {
		checkHostPort(&p, "metrics.addr", c.Metrics.Addr)
	}
	return p.err()
}

func (l *Log) validate(p *problems) {
	switch strings.ToLower(l.Level) {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "%q is not one of debug, info, warn, error", l.Level)
	}
	switch l.Format {
	case "text", "json":
	default:
		p.add("log.format", "%q is not one of text, json", l.Format)
	}
}

func (k *Kafka) validate(p *problems) {
	if len(k.Brokers) == 0 {
		p.add("kafka.brokers", "must not be empty")
	}
	for _, b := range k.Brokers {
		checkHostPort(p, "kafka.brokers", b)
	}
	topics := map[string]string{
		"kafka.topics.events":  k.Topics.Events,
		"kafka.topics.dlq":     k.Topics.DLQ,
		"kafka.topics.hotkeys": k.Topics.Hotkeys,
		"kafka.topics.windows": k.Topics.Windows,
		"kafka.topics.reports": k.Topics.Reports,
	}
	seen := map[string]string{}
	for _, key := range sortedKeys(topics) {
		name := topics[key]
		if err := checkTopicName(name); err != nil {
			p.add(key, "%v", err)
			continue
		}
		if other, dup := seen[name]; dup {
			p.add(key, "topic %q is also %s; every topic must be distinct", name, other)
		}
		seen[name] = key
	}
	if k.Partitions < 1 || k.Partitions > 100_000 {
		p.add("kafka.partitions", "%d is outside 1..100000", k.Partitions)
	}
	if k.ReplicationFactor != -1 && (k.ReplicationFactor < 1 || k.ReplicationFactor > 32767) {
		p.add("kafka.replication_factor", "%d: want -1 (broker default) or 1..32767", k.ReplicationFactor)
	}
	switch k.SASL.Mechanism {
	case "":
	case "plain", "scram-sha-256", "scram-sha-512":
		if k.SASL.User == "" {
			p.add("kafka.sasl.user", "must be set when kafka.sasl.mechanism is %s", k.SASL.Mechanism)
		}
	default:
		p.add("kafka.sasl.mechanism", "%q is not one of plain, scram-sha-256, scram-sha-512 (or empty for none)", k.SASL.Mechanism)
	}
	if (k.TLS.CertFile == "") != (k.TLS.KeyFile == "") {
		p.add("kafka.tls.cert_file", "cert_file and key_file go together: set both or neither")
	}
	if !k.TLS.Enabled && (k.TLS.CAFile != "" || k.TLS.CertFile != "" || k.TLS.ServerName != "") {
		p.add("kafka.tls.enabled", "TLS files or server_name are set but TLS is off; set kafka.tls.enabled: true")
	}
}

func (c *ClickHouse) validate(p *problems) {
	if !c.Enabled {
		return
	}
	if len(c.Addr) == 0 {
		p.add("clickhouse.addr", "must not be empty when clickhouse.enabled is true")
	}
	for _, a := range c.Addr {
		checkHostPort(p, "clickhouse.addr", a)
	}
	if c.Database == "" {
		p.add("clickhouse.database", "must not be empty")
	} else if !isIdent(c.Database) {
		p.add("clickhouse.database", "%q must be letters, digits and underscores, not starting with a digit", c.Database)
	}
	if c.DialTimeout <= 0 {
		p.add("clickhouse.dial_timeout", "must be positive, e.g. 5s")
	}
}

func (e *Events) validate(p *problems) {
	switch e.Codec {
	case "json", "binary":
	default:
		p.add("events.codec", "%q is not one of json, binary", e.Codec)
	}
	if e.MaxKeyBytes <= 0 || e.MaxKeyBytes > 1<<20 {
		p.add("events.max_key_bytes", "%d is outside 1..1048576", e.MaxKeyBytes)
	}
	if e.MaxSkew < 0 {
		p.add("events.max_skew", "must not be negative; 0 disables the check")
	}
}

func checkHostPort(p *problems, key, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		p.add(key, "%q is not host:port", addr)
		return
	}
	_ = host // an empty host means all interfaces, which is allowed
}

// checkTopicName applies Kafka's own rules so a bad name fails here, with
// its key, instead of at the first produce.
func checkTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a legal topic name", name)
	case len(name) > 249:
		return fmt.Errorf("%d characters; Kafka allows at most 249", len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q has %q; Kafka allows only letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return nil
}

func isIdent(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func (in *Ingest) validate(p *problems, out *Topics) {
	switch in.Format {
	case "json", "combined", "nginx", "apache", "redis":
	case "regex":
		if in.Regex.Pattern == "" {
			p.add("ingest.regex.pattern", "must be set when ingest.format is regex, with a (?P<key>…) group")
		}
	default:
		p.add("ingest.format", "%q is not one of json, combined, nginx, apache, redis, regex", in.Format)
	}
	if in.Format == "json" && in.JSON.Key == "" {
		p.add("ingest.json.key", "must be set when ingest.format is json")
	}
	switch in.Combined.Key {
	case "path", "path_noquery":
	case "query":
		if in.Combined.QueryParam == "" {
			p.add("ingest.combined.query_param", "must be set when ingest.combined.key is query")
		}
	default:
		p.add("ingest.combined.key", "%q is not one of path, path_noquery, query", in.Combined.Key)
	}
	switch in.Compression {
	case "zstd", "lz4", "snappy", "gzip", "none":
	default:
		p.add("ingest.compression", "%q is not one of zstd, lz4, snappy, gzip, none", in.Compression)
	}
	if in.Linger < 0 {
		p.add("ingest.linger", "must not be negative")
	}
	if in.MaxBufferedRecords < 1 {
		p.add("ingest.max_buffered_records", "must be at least 1")
	}
	if in.MaxLineBytes < 1 {
		p.add("ingest.max_line_bytes", "must be at least 1")
	}
	if in.DLQMaxRaw < 1 {
		p.add("ingest.dlq_max_raw", "must be at least 1")
	}
	if in.PollInterval <= 0 {
		p.add("ingest.poll_interval", "must be positive, e.g. 200ms")
	}
	if in.SaveInterval <= 0 {
		p.add("ingest.save_interval", "must be positive, e.g. 1s")
	}
	if in.ReadBackMaxRecords < 1 {
		p.add("ingest.readback_max_records", "must be at least 1, e.g. 1000000")
	}
	seen := map[string]bool{}
	for _, t := range in.Topic.Topics {
		switch err := checkTopicName(t); {
		case err != nil:
			p.add("ingest.topic.topics", "%v", err)
		case t == out.Events || t == out.DLQ:
			// Reading what we write would re-publish every event forever.
			p.add("ingest.topic.topics", "%q is also an output topic (kafka.topics.events or .dlq); read a raw log topic", t)
		case seen[t]:
			p.add("ingest.topic.topics", "%q is named twice", t)
		}
		seen[t] = true
	}
	if err := checkTopicName(in.Topic.Group); err != nil {
		// Kafka is laxer about group ids, but a group named like a topic
		// survives every tool and ACL syntax.
		p.add("ingest.topic.group", "%v", err)
	}
	if in.Topic.CommitInterval <= 0 {
		p.add("ingest.topic.commit_interval", "must be positive, e.g. 1s")
	}
}
