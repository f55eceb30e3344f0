package config

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/keylog"
	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/clickhouse"
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

// problems collects FieldErrors, each once.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	fe := &FieldError{Key: key, Problem: fmt.Sprintf(format, args...)}
	for _, e := range *p {
		if *e.(*FieldError) == *fe {
			return // one list with the same mistake twice says it once
		}
	}
	*p = append(*p, fe)
}

// addOptions adds the problems of an options type's Validate, each
// *ingest.OptionError under prefix + its option name.
func (p *problems) addOptions(prefix string, err error) {
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var oe *ingest.OptionError
		if errors.As(e, &oe) {
			p.add(prefix+oe.Option, "%s", oe.Problem)
		} else {
			p.add(strings.TrimSuffix(prefix, "."), "%v", e)
		}
	}
}

func (p problems) err() error { return errors.Join(p...) }

// Validate checks the keys cmd reads (every key for the zero Command) and
// returns every problem found, each a *FieldError naming its key, joined
// with errors.Join; nil when c is usable by cmd. It builds what the
// owning packages can check only by building (a log parser), so nothing
// is left to fail after a command has started talking to Kafka.
func (c *Config) Validate(cmd Command) error {
	var p problems
	c.Log.validate(&p, cmd)
	if c.Metrics.Addr != "" {
		checkHostPort(&p, "metrics.addr", c.Metrics.Addr, true)
	}
	c.Kafka.validate(&p, cmd)
	c.Events.validate(&p)
	if cmd.Reads("ingest") {
		c.Ingest.validate(&p, &c.Kafka.Topics)
	}
	if cmd.Reads("detect") {
		validateDetect(&p, &c.Detect, &c.Kafka.Topics)
	}
	if cmd.Reads("pipeline") {
		p.addPrefixed("pipeline", c.Pipeline.Validate())
	}
	if cmd.Reads("merge") {
		p.addPrefixed("merge", c.Merge.Validate())
	}
	if cmd.Reads("clickhouse") {
		validateClickHouse(&p, &c.ClickHouse.Options)
		if c.ClickHouse.Password != "" && c.ClickHouse.PasswordFile != "" {
			p.add("clickhouse.password_file", "clickhouse.password is set too; set one of them")
		}
		c.ClickHouse.TLS.validate(&p, "clickhouse.tls")
	}
	if cmd.Reads("archive") && c.Archive.Root != "" {
		p.addPrefixed("archive", c.Archive.Validate())
	}
	if cmd.Reads("api") {
		validateAPI(&p, &c.API)
	}
	return p.err()
}

func (l *Log) validate(p *problems, cmd Command) {
	if cmd.Reads("log.keys") {
		if _, err := keylog.ParsePolicy(l.Keys); err != nil {
			p.add("log.keys", "%v", err)
		}
	}
	if !slices.Contains(LogLevels(), strings.ToLower(l.Level)) {
		p.add("log.level", "%q is not one of %s", l.Level, strings.Join(LogLevels(), ", "))
	}
	if !slices.Contains(LogFormats(), l.Format) {
		p.add("log.format", "%q is not one of %s", l.Format, strings.Join(LogFormats(), ", "))
	}
}

func (k *Kafka) validate(p *problems, cmd Command) {
	if len(k.Brokers) == 0 {
		p.add("kafka.brokers", "must not be empty: name at least one broker as host:port")
	}
	for _, b := range k.Brokers {
		checkHostPort(p, "kafka.brokers", b, false)
	}
	seen := map[string]string{}
	tv := reflect.ValueOf(k.Topics)
	for i := range tv.NumField() {
		key := "kafka.topics." + tv.Type().Field(i).Tag.Get("mapstructure")
		if !cmd.Reads(key) {
			continue
		}
		name := tv.Field(i).String()
		if err := topics.CheckName(name); err != nil {
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
	if k.ConnectTimeout < 0 && cmd.Reads("kafka.connect_timeout") {
		p.add("kafka.connect_timeout", "must not be negative; 0 waits as long as it takes")
	}
	if k.ReplicationFactor != -1 && (k.ReplicationFactor < 1 || k.ReplicationFactor > 32767) {
		p.add("kafka.replication_factor", "%d: want -1 (broker default) or 1..32767", k.ReplicationFactor)
	}
	switch {
	case k.SASL.Mechanism == "":
	case slices.Contains(SASLMechanisms(), k.SASL.Mechanism):
		if k.SASL.User == "" {
			p.add("kafka.sasl.user", "must be set when kafka.sasl.mechanism is %s", k.SASL.Mechanism)
		}
	default:
		p.add("kafka.sasl.mechanism", "%q is not one of %s (or empty for none)", k.SASL.Mechanism, strings.Join(SASLMechanisms(), ", "))
	}
	if k.SASL.Password != "" && k.SASL.PasswordFile != "" {
		p.add("kafka.sasl.password_file", "kafka.sasl.password is set too; set one of them")
	}
	k.TLS.validate(p, "kafka.tls")
}

// validate checks the TLS keys under section (kafka.tls, clickhouse.tls).
func (t *TLS) validate(p *problems, section string) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.add(section+".cert_file", "cert_file and key_file go together: set both or neither")
	}
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.ServerName != "" || t.InsecureSkipVerify) {
		p.add(section+".enabled", "TLS files, server_name or insecure_skip_verify are set but TLS is off; set %s.enabled: true", section)
	}
}

func (e *Events) validate(p *problems) {
	codec, err := schemas.CodecByName(e.Codec)
	if err != nil {
		p.add("events.codec", "%v", err)
	}
	if e.Limits.MaxKeyBytes <= 0 || e.Limits.MaxKeyBytes > 1<<20 {
		p.add("events.max_key_bytes", "%d is outside 1..1048576", e.Limits.MaxKeyBytes)
	}
	if e.Limits.MaxSkew < 0 {
		p.add("events.max_skew", "must not be negative; 0 disables the time checks")
	}
	if e.Limits.AllowBinaryKeys && err == nil && codec != schemas.Binary {
		// The JSON codec writes keys as text; it would mangle them.
		p.add("events.allow_binary_keys", "needs events.codec: binary (the %s codec carries only UTF-8 keys)", e.Codec)
	}
}

func (in *Ingest) validate(p *problems, out *Topics) {
	if t := in.Tail.PositionsTopic; t == out.Events || t == out.DLQ {
		p.add("ingest.positions_topic", "%q is also kafka.topics.events or .dlq; the positions need a topic of their own", t)
	}
	in.validateParse(p)
	p.addOptions("ingest.", in.Lines.Validate())
	p.addOptions("ingest.", in.Producer.Validate())
	p.addOptions("ingest.", in.Delivery.Validate())
	p.addOptions("ingest.", in.Tail.Validate())
	p.addOptions("ingest.topic.", in.Topic.Validate())
	for _, t := range in.Topic.Topics {
		if t == out.Events || t == out.DLQ {
			// Reading what we write would re-publish every event forever.
			p.add("ingest.topic.topics", "%q is also an output topic (kafka.topics.events or .dlq); read a raw log topic", t)
		}
	}
}

// validateParse checks the parser options by building the parser, the
// only check logparse offers (a time layout or a regular expression is
// valid when it compiles). Its errors start with the format's section
// ("json: …"), which names the key.
func (in *Ingest) validateParse(p *problems) {
	if !slices.Contains(logparse.Formats(), strings.ToLower(in.Parse.Format)) {
		p.add("ingest.format", "%q is not one of %s", in.Parse.Format, strings.Join(logparse.Formats(), ", "))
		return
	}
	if _, err := logparse.New(in.Parse); err != nil {
		section, problem, ok := strings.Cut(err.Error(), ": ")
		if ok && isSection("ingest."+section) {
			p.add("ingest."+section, "%s", problem)
		} else {
			p.add("ingest.format", "%v", err)
		}
	}
}

// validateDetect checks the detect section: its options' own rules, each
// under its key, and that it reads no topic detect writes.
func validateDetect(p *problems, d *detect.Options, out *Topics) {
	if err := d.Validate(); err != nil {
		for _, e := range unjoin(err) {
			var oe *detect.OptionError
			if errors.As(e, &oe) {
				p.add("detect."+oe.Option, "%s", oe.Problem)
			} else {
				p.add("detect", "%v", e)
			}
		}
	}
	if d.RegexTopics {
		return
	}
	for _, t := range d.Topics {
		for _, o := range []struct{ key, name string }{{"dlq", out.DLQ}, {"hotkeys", out.Hotkeys}, {"windows", out.Windows},
			{"reports", out.Reports}, {"progress", out.Progress}} {
			if t == o.name {
				// Reading what we write would count our own outputs.
				p.add("detect.topics", "%q is also kafka.topics.%s; read events topics", t, o.key)
			}
		}
	}
}

// validateClickHouse checks the clickhouse section when it is enabled:
// addresses as host:port here, the rest by the sink's own rules.
func validateClickHouse(p *problems, c *clickhouse.Options) {
	if !c.Enabled {
		return
	}
	if len(c.Addr) == 0 {
		p.add("clickhouse.addr", "must not be empty when clickhouse.enabled is true")
	}
	for _, a := range c.Addr {
		checkHostPort(p, "clickhouse.addr", a, false)
	}
	if c.Database == "" {
		p.add("clickhouse.database", "must not be empty")
	} else if !isIdent(c.Database) {
		p.add("clickhouse.database", "%q must be letters, digits and underscores, not starting with a digit", c.Database)
	}
	for _, e := range unjoin(c.Validate()) {
		// The sink names its keys "clickhouse.key: problem"; the address
		// and database were checked above, in more detail.
		key, problem, ok := strings.Cut(e.Error(), ": ")
		if !ok || !slices.Contains(AllKeys(), key) {
			p.add("clickhouse", "%v", e)
			continue
		}
		if key != "clickhouse.addr" && key != "clickhouse.database" {
			p.add(key, "%s", problem)
		}
	}
}

// addPrefixed adds the problems of an options type whose errors start
// with the option's name ("top_n: …", "redis_cluster.shards: …", or
// after its package's sentinel: "invalid archive options: zstd = …"),
// each under section + that name when it is a key or section, under
// section otherwise.
func (p *problems) addPrefixed(section string, err error) {
	for _, e := range unjoin(err) {
		msg := e.Error()
		if i := strings.Index(msg, "options: "); i >= 0 {
			msg = msg[i+len("options: "):]
		}
		name := msg
		if i := strings.IndexAny(msg, ": ="); i >= 0 {
			name = msg[:i]
		}
		if i := strings.IndexByte(name, '['); i > 0 {
			// An element of a list ("rules[2] (hot-api): …"): the list's
			// key, the whole message as the problem.
			p.add(section+"."+name[:i], "%s", msg)
			continue
		}
		key := section + "." + name
		if name != "" && (slices.Contains(AllKeys(), key) || isSection(key)) {
			problem := strings.TrimLeft(strings.TrimPrefix(msg, name), " :=")
			p.add(key, "%s", problem)
		} else {
			p.add(section, "%s", msg)
		}
	}
}

// unjoin returns the errors joined in err (err itself when it joins
// none); nil for nil.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// checkHostPort wants host:port with a port number; an empty host means
// every interface (or the local host, to dial), which is allowed. Port 0
// (pick a free one) only where zeroPort allows, for a listener.
func checkHostPort(p *problems, key, addr string, zeroPort bool) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		p.add(key, "%q is not host:port, e.g. 127.0.0.1:9092", addr)
		return
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 && !zeroPort {
		p.add(key, "%q: port %q is not a number from 1 to 65535", addr, port)
	}
}

func isIdent(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// validateAPI checks the api section: its address, and its options' own
// rules even with no address, so a mistake shows before the API is turned
// on. The token file is read when detect starts (controlplane.LoadToken).
func validateAPI(p *problems, o *controlplane.Options) {
	if o.Addr != "" {
		checkHostPort(p, "api.addr", o.Addr, true)
	}
	for _, e := range unjoin(o.Validate()) {
		var oe *controlplane.OptionError
		if errors.As(e, &oe) {
			p.add("api."+oe.Option, "%s", oe.Problem)
		} else {
			p.add("api", "%v", e)
		}
	}
}
