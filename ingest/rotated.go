package ingest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// RotatedSuffix, at the end of a pattern of TailOptions.Rotated, matches
// what rotators append to a rotated file's name and nothing else:
//
//   - a number: access.log.1, access.log.2 (logrotate's rotate count,
//     Docker's json-file);
//   - a date and time, as logrotate's dateext writes it with any
//     dateformat of %Y, %m, %d, %H, %M, %S and %s: a year, then one to
//     five two-digit fields (month, day, hour, minutes, seconds), each
//     after an optional separator (-, _, ., T or :), then optionally the
//     seconds since the epoch: access.log-20261127 (the default -%Y%m%d),
//     access.log-2026112713 (hourly), access.log-202611 (monthly, -%Y%m),
//     access.log.2026-11-27, access.log-20261127-1764201600 (-%Y%m%d-%s);
//     the kubelet's 0.log.20261127-130405 and rotatelogs' access.log.%Y.%m.%d
//     have the same shape;
//   - the seconds since the epoch alone, 9 to 11 digits: access.log.1764201600
//     (rotatelogs' default, dateformat .%s);
//   - any of them followed by the extension of a compressed file: .gz,
//     .bz2, .xz, .zst, .lz4 or .Z (compressed files are recognised, not
//     read).
//
// A neighbour such as access.log.truth.json or access.log.bak is not a
// rotated name.
const RotatedSuffix = "{rotated}"

// rotatedSuffixRe matches a whole RotatedSuffix.
var rotatedSuffixRe = regexp.MustCompile(`^(?:` +
	`\.\d{1,4}` + // .1
	`|[-._]\d{4}(?:[-_.T:]?\d{2}){1,5}(?:[-_.]?\d{9,11})?` + // -20261127, .2026-11-27, .20261127-130405, -20261127-1764201600
	`|[-._]\d{9,11}` + // .1764201600
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
