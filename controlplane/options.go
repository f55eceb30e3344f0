package controlplane

import (
	"errors"
	"fmt"
	"time"
)

// Options are the settings of a process serving the API and its
// dashboard (the api section of keyheat's configuration): where it
// listens and how it guards changes. The Kafka side (which registry, which
// brokers) is the process's own.
type Options struct {
	// Addr is the host:port serving the API (/api/) and the dashboard
	// (/); empty serves neither. The same address as metrics.addr serves
	// them beside /metrics on one listener.
	Addr string `mapstructure:"addr"`
	// Token is the bearer token changes need; from the environment
	// (KEYHEAT_API_TOKEN) rather than a file others can read. Empty, with
	// no TokenFile, refuses every change.
	Token string `mapstructure:"token"`
	// TokenFile is a file holding the token (a mounted secret); set Token
	// or TokenFile, not both.
	TokenFile string `mapstructure:"token_file"`
	// ProtectReads puts the read routes behind the token too.
	ProtectReads bool `mapstructure:"protect_reads"`
	// MaxTTL bounds a promote's or demote's TTL; 0 means DefaultMaxTTL.
	MaxTTL time.Duration `mapstructure:"max_ttl"`
}

// DefaultOptions returns the defaults: no listener, no token (changes
// refused), reads open, TTLs up to DefaultMaxTTL.
func DefaultOptions() Options {
	return Options{MaxTTL: DefaultMaxTTL}
}

// OptionError is a problem with one option, named by its key in the api
// section.
type OptionError struct {
	Option  string
	Problem string
}

func (e *OptionError) Error() string { return e.Option + ": " + e.Problem }

// Validate reports every problem of o as *OptionError values joined with
// errors.Join (the address is the caller's to check: it knows the other
// listeners), nil when o is usable. It does not read TokenFile: LoadToken
// does, when the process starts; its errors never quote the token.
func (o *Options) Validate() error {
	var errs []error
	if o.Token != "" && o.TokenFile != "" {
		errs = append(errs, &OptionError{Option: "token", Problem: "api.token and api.token_file are both set; set one of them"})
	}
	if o.Token != "" {
		if err := checkToken(o.Token); err != nil {
			errs = append(errs, &OptionError{Option: "token", Problem: err.Error()})
		}
	}
	if o.MaxTTL < 0 || o.MaxTTL > 0 && o.MaxTTL < MinTTL {
		errs = append(errs, &OptionError{Option: "max_ttl", Problem: fmt.Sprintf("%v is shorter than the shortest TTL a change takes (%v)", o.MaxTTL, MinTTL)})
	}
	if o.ProtectReads && o.Token == "" && o.TokenFile == "" {
		errs = append(errs, &OptionError{Option: "protect_reads", Problem: "needs a token (api.token or api.token_file): with none, nobody could read"})
	}
	return errors.Join(errs...)
}
