package doccheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Link is a relative link of a page: [text](Target) or ![alt](Target).
type Link struct {
	// File is the page, relative to the repository root; Line the link's
	// line (1-based).
	File   string
	Line   int
	Target string
}

func (l Link) String() string { return fmt.Sprintf("%s:%d: (%s)", l.File, l.Line, l.Target) }

// linkRe matches an inline link or image: ](target) with an optional
// "title" after the target.
var linkRe = regexp.MustCompile(`\]\(([^()\s]*)(?:\s+"[^"]*")?\)`)

// codeSpanRe matches inline code, whose text is not Markdown.
var codeSpanRe = regexp.MustCompile("`[^`]*`")

// Links returns the relative links of the documentation under root: every
// inline link whose target has no scheme (http:, mailto:, …), outside code
// blocks and code spans.
func Links(root string) ([]Link, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var out []Link
	for _, f := range files {
		md, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		out = append(out, LinksOf(f, md)...)
	}
	return out, nil
}

var schemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// LinksOf returns the relative links of one Markdown document, named
// file in what it returns.
func LinksOf(file string, md []byte) []Link {
	var out []Link
	var fence string
	for i, line := range strings.Split(string(md), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence = f
			continue
		}
		line = codeSpanRe.ReplaceAllString(line, "")
		for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
			t := m[1]
			if t == "" || schemeRe.MatchString(t) {
				continue
			}
			out = append(out, Link{File: file, Line: i + 1, Target: t})
		}
	}
	return out
}

// Check says what is wrong with a link, or nil: its file must exist
// (relative to its page's folder, inside root), and a #fragment must be
// a heading of the Markdown file it points to.
func Check(root string, l Link) error {
	target, frag, _ := strings.Cut(l.Target, "#")
	file := l.File
	if target != "" {
		file = path.Clean(path.Join(path.Dir(l.File), target))
		if file == ".." || strings.HasPrefix(file, "../") {
			return fmt.Errorf("%s: points outside the repository", l)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
			return fmt.Errorf("%s: %s does not exist", l, file)
		}
	}
	if frag == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return fmt.Errorf("%s: a #fragment on %s, which is not Markdown", l, file)
	}
	md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return err
	}
	if !Anchors(md)[frag] {
		return fmt.Errorf("%s: %s has no heading #%s", l, file, frag)
	}
	return nil
}

// Anchors returns the anchors a Markdown document's headings get, as
// GitHub makes them: lower case, punctuation dropped, spaces turned into
// hyphens, a repeated anchor suffixed -1, -2, ….
func Anchors(md []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	var fence string
	for _, line := range strings.Split(string(md), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence = f
			continue
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if text == "" || text[0] != ' ' {
			continue
		}
		a := Slug(strings.TrimSpace(text))
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// Slug is the anchor GitHub gives a heading's text.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
