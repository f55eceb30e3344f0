package ingest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// RotatedSuffix, at the end of a pattern of TailOptions.Rotated, matches
// what logrotate appends to a rotated file's name and nothing else:
//
//   - a number: access.log.1, access.log.2 (rotate count);
//   - a date, as dateext writes it: access.log-20261127 (its default
//     dateformat -%Y%m%d), access.log-2026112713 (hourly, -%Y%m%d%H),
//     access.log-20261127-1764201600 (-%Y%m%d-%s); or with dashes, as a
//     dateformat of .%Y-%m-%d or -%Y-%m-%d writes it, an hour, minutes and
//     seconds allowed after it: access.log.2026-11-27;
//   - either followed by the extension of a compressed file: .gz, .bz2,
//     .xz, .zst, .lz4 or .Z (compressed files are recognised, not read).
//
// A neighbour such as access.log.truth.json or access.log.bak is not a
// rotated name.
const RotatedSuffix = "{rotated}"

// rotatedSuffixRe matches a whole RotatedSuffix.
var rotatedSuffixRe = regexp.MustCompile(`^(?:` +
	`\.\d{1,4}` + // .1
	`|[-._]\d{8}(?:\d{2})?(?:-\d{9,11})?` + // -20261127, -2026112713, -20261127-1764201600
	`|[-._]\d{4}-\d{2}-\d{2}(?:[-_T]\d{2}(?:[-:]?\d{2}){0,2})?` + // .2026-11-27, -2026-11-27-13
	`)(?:\.(?:gz|bz2|xz|zst|lz4|Z))?$`)

// rotatedPattern is one pattern of TailOptions.Rotated for one path: a
// glob, absolute, and whether RotatedSuffix ends it.
type rotatedPattern struct {
	glob   string
	suffix bool
}

// rotatedPatterns turns the rotated patterns of TailOptions into absolute
// patterns for path: {name} is its base name, a relative pattern lives in
// its folder.
func rotatedPatterns(path string, patterns []string) []rotatedPattern {
	var out []rotatedPattern
	for _, p := range patterns {
		p = strings.ReplaceAll(p, "{name}", filepath.Base(path))
		g, suffix := strings.CutSuffix(p, RotatedSuffix)
		if !filepath.IsAbs(g) {
			g = filepath.Join(filepath.Dir(path), g)
		}
		out = append(out, rotatedPattern{glob: g, suffix: suffix})
	}
	return out
}

// match reports whether name, a path, matches the pattern.
func (p rotatedPattern) match(name string) bool {
	if !p.suffix {
		ok, _ := filepath.Match(p.glob, name)
		return ok
	}
	// The suffix starts at a separator: try each, and the glob on what
	// is before it.
	for i := range len(name) {
		if c := name[i]; (c == '.' || c == '-' || c == '_') && rotatedSuffixRe.MatchString(name[i:]) {
			if ok, _ := filepath.Match(p.glob, name[:i]); ok {
				return true
			}
		}
	}
	return false
}

// checkRotatedPattern says what is wrong with a pattern of
// TailOptions.Rotated, nil when nothing is.
func checkRotatedPattern(g string) error {
	head, _ := strings.CutSuffix(g, RotatedSuffix)
	if strings.Contains(head, RotatedSuffix) {
		return fmt.Errorf("%q: %s may only end a pattern", g, RotatedSuffix)
	}
	if _, err := filepath.Match(head, ""); err != nil {
		return fmt.Errorf("%q is not a glob pattern: %w", g, err)
	}
	return nil
}
