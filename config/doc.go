// Package config turns a YAML file, KEYHEAT_* environment variables and
// command-line flags into the structs keyheat's commands run with.
//
// It is the only package that touches viper, and only cmd/ imports it.
// Where a package owns a section's settings (logparse.Config for how
// ingest parses, ingest.ProducerOptions, schemas.Limits, …), Config embeds
// that package's options type, whose mapstructure tags name the keys and
// whose Default… function gives the defaults: nothing is mirrored here.
// Sections no library owns (log, metrics, kafka) are declared here.
// Allowed values come from their owners' lists (logparse.Formats,
// ingest.Compressions, schemas.Codecs), which validation uses and tests
// hold the example file to. A key holding a list of sections (slot
// ranges, rules) is YAML text in a flag or the environment.
//
// Each command reads only some keys (Command, cmd tags): its flags, its
// --help and its validation cover those. One file serves every command;
// keys of other commands in it are accepted, a key of no command is an
// error rather than a typo that silently does nothing. Precedence, highest
// first: a command's arguments for a key, a flag the user set, an
// environment variable, the config file, the default. Load validates
// everything the command reads, building what can only be checked by
// building (a log parser), so a command finds every configuration mistake
// before it talks to Kafka.
//
// Secrets and the files that hold them are resolved by Load, never by
// the packages that use them: a *_file key (kafka.sasl.password_file,
// clickhouse.password_file) is read into the password it stands for, and
// clickhouse.tls (the same keys as kafka.tls) into the *tls.Config that
// clickhouse.Options.TLS carries. Kafka's TLS and SASL become franz-go
// options through Kafka.ClientOpts, whose refusals Kafka.CheckAccess
// names by setting; the ClickHouse sink names its own
// (clickhouse.RefusedError).
//
// The example file keyheat.example.yaml (in this folder, linked from the
// repository root) documents every key, grouped by the commands that read
// it; tests check that it names exactly the keys Config has, with their
// defaults and readers. It is embedded, and the comment above each key is
// that key's flag help, so the two never disagree.
package config
