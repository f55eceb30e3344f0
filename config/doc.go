// Package config turns a YAML file, KEYHEAT_* environment variables and
// command-line flags into the plain structs keyheat's commands run with.
//
// It is the only package that touches viper, and only cmd/ imports it:
// library packages (pipeline, sink, sketch, hotring) take their own config
// structs and never look anything up themselves. Precedence, highest first:
// a flag the user set, an environment variable, the config file, the
// default. Every key has a default, so every key can be set from the
// environment (viper ignores env vars for keys it does not know), and a key
// in the file that keyheat does not know is an error rather than a typo that
// silently does nothing.
//
// The example file keyheat.example.yaml (in this folder, linked from the
// repository root) documents every key; a test checks that it names
// exactly the keys Defaults has, with their defaults. It is embedded, and
// the comment above each key is that key's flag help, so the two never
// disagree.
package config
