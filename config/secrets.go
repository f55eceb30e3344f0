package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// readSecretFiles sets each password whose *_file key is set, and read by
// cmd, from that file.
func (c *Config) readSecretFiles(cmd Command) error {
	var errs []error
	for _, s := range []struct {
		key  string
		file string
		dst  *string
	}{
		{"kafka.sasl.password_file", c.Kafka.SASL.PasswordFile, &c.Kafka.SASL.Password},
		{"clickhouse.password_file", c.ClickHouse.PasswordFile, &c.ClickHouse.Password},
	} {
		if s.file == "" || !cmd.Reads(s.key) {
			continue
		}
		v, err := readSecretFile(s.key, s.file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*s.dst = v
	}
	return errors.Join(errs...)
}

// readSecretFile returns the contents of the file at path, set as key,
// without its trailing line breaks (the rule of api.token_file): what an
// editor or `echo secret > file` leaves is not part of the secret. An
// empty file is an error, as a secret left out of a mounted file is far
// likelier than an empty password. The errors name the key and the path,
// never the contents.
func readSecretFile(key, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &FieldError{Key: key, Problem: fmt.Sprintf("read the secret: %v", err)}
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", &FieldError{Key: key, Problem: fmt.Sprintf("%s is empty; write the secret in it, or leave %s unset", path, key)}
	}
	return v, nil
}
