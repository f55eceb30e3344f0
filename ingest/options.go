package ingest

import (
	"errors"
	"fmt"
)

// OptionError is a problem with one option of an options type of this
// package (ProducerOptions, LineOptions, DeliveryOptions, TailOptions,
// TopicOptions).
// Option is the option's name as its mapstructure tag spells it, which is
// its key in a config file under the section the type is mapped onto, so
// a config loader can name the key.
type OptionError struct {
	Option  string
	Problem string
}

func (e *OptionError) Error() string { return e.Option + ": " + e.Problem }

// optionErrors collects OptionErrors for a Validate.
type optionErrors []error

func (p *optionErrors) add(option, format string, args ...any) {
	*p = append(*p, &OptionError{Option: option, Problem: fmt.Sprintf(format, args...)})
}

func (p optionErrors) err() error { return errors.Join(p...) }
