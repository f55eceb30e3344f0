// Package doccheck reads the repository's user documentation, README.md
// and docs/*.md, for the tests that keep it true: the shell commands its
// code blocks show (cmd/detect and cmd/ingest parse each of theirs with
// their real command tree) and the relative links it makes (this
// package's own test).
//
// It does not run anything and does not understand all of the shell: it
// splits a block into simple commands at | || && ; & and line ends,
// joins lines continued with a backslash, drops comments, leading
// VAR=value assignments and redirections, and keeps quoted words and
// $(…) substitutions as single words. That is enough for the commands a
// page shows a reader; a command too clever for it is a command too
// clever for the page.
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Files returns the documentation files under root, relative to it:
// README.md, then docs/*.md in name order.
func Files(root string) ([]string, error) {
	files := []string{"README.md"}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err != nil {
		return nil, err
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	slices.Sort(docs)
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files, nil
}

// Command is one invocation of a keyheat command in a shell code block.
type Command struct {
	// File is the page, relative to the repository root; Line the line
	// the command starts on (1-based).
	File string
	Line int
	// Text is the simple command as the page has it, continuation lines
	// joined.
	Text string
	// Prog is "detect" or "ingest".
	Prog string
	// Args are the words after the program: subcommand, flags, arguments.
	Args []string
	// Env holds the KEYHEAT_* variables the block exported before the
	// command with a literal value (NAME=value), and those set on the
	// command's own line.
	Env []string
}

func (c Command) String() string { return fmt.Sprintf("%s:%d: %s", c.File, c.Line, c.Text) }

// shellLangs are the code block languages whose lines are shell commands.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Block is a fenced code block of a page.
type Block struct {
	Lang string
	// Line is the line of the block's first content line (1-based).
	Line  int
	Lines []string
}

// Blocks returns the fenced code blocks of a Markdown document.
func Blocks(md []byte) []Block {
	var out []Block
	var cur *Block
	var fence string
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				cur = &Block{Lang: strings.TrimSpace(strings.TrimLeft(trimmed, f[:1])), Line: n + 1}
				if i := strings.IndexAny(cur.Lang, " {"); i >= 0 {
					cur.Lang = cur.Lang[:i]
				}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
			out = append(out, *cur)
			cur = nil
			continue
		}
		cur.Lines = append(cur.Lines, line)
	}
	return out
}

// fenceOf returns the fence a line opens (``` or ~~~, or longer), or "".
func fenceOf(s string) string {
	for _, c := range []string{"`", "~"} {
		n := 0
		for n < len(s) && s[n:n+1] == c {
			n++
		}
		if n >= 3 {
			return s[:n]
		}
	}
	return ""
}

// Commands returns every detect and ingest command in the shell code
// blocks of the documentation under root.
func Commands(root string) ([]Command, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var out []Command
	for _, f := range files {
		md, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		cmds, err := CommandsOf(f, md)
		if err != nil {
			return nil, err
		}
		out = append(out, cmds...)
	}
	return out, nil
}

// CommandsOf returns the detect and ingest commands in the shell code
// blocks of one Markdown document, named file in what it returns.
func CommandsOf(file string, md []byte) ([]Command, error) {
	var out []Command
	for _, b := range Blocks(md) {
		if !shellLangs[b.Lang] {
			continue
		}
		env := map[string]string{}
		for _, sc := range SimpleCommands(b) {
			if len(sc.Words) == 0 {
				continue
			}
			words := sc.Words
			if words[0] == "export" {
				for _, w := range words[1:] {
					if name, val, ok := assignment(w); ok {
						if literal(val) {
							env[name] = unquote(val)
						} else {
							delete(env, name)
						}
					}
				}
				continue
			}
			local := map[string]string{}
			for len(words) > 0 {
				name, val, ok := assignment(words[0])
				if !ok {
					break
				}
				if literal(val) {
					local[name] = unquote(val)
				}
				words = words[1:]
			}
			prog, args, ok := keyheatCommand(words)
			if !ok {
				continue
			}
			c := Command{File: file, Line: sc.Line, Text: sc.Text, Prog: prog}
			for _, a := range args {
				c.Args = append(c.Args, unquote(a))
			}
			for _, m := range []map[string]string{env, local} {
				for k, v := range m {
					if strings.HasPrefix(k, "KEYHEAT_") {
						c.Env = append(c.Env, k+"="+v)
					}
				}
			}
			slices.Sort(c.Env)
			out = append(out, c)
		}
	}
	return out, nil
}

// keyheatCommand says whether words run detect or ingest: go run
// ./cmd/NAME, bin/NAME, ./bin/NAME or NAME, and returns its arguments.
func keyheatCommand(words []string) (prog string, args []string, ok bool) {
	if len(words) >= 3 && words[0] == "go" && words[1] == "run" {
		switch strings.TrimSuffix(words[2], "/") {
		case "./cmd/detect", "github.com/keyheat/keyheat/cmd/detect":
			return "detect", words[3:], true
		case "./cmd/ingest", "github.com/keyheat/keyheat/cmd/ingest":
			return "ingest", words[3:], true
		}
		return "", nil, false
	}
	switch strings.TrimPrefix(strings.TrimPrefix(words[0], "./"), "bin/") {
	case "detect":
		if words[0] == "detect" || strings.Contains(words[0], "bin/") {
			return "detect", words[1:], true
		}
	case "ingest":
		if words[0] == "ingest" || strings.Contains(words[0], "bin/") {
			return "ingest", words[1:], true
		}
	}
	return "", nil, false
}

var assignRe = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

func assignment(w string) (name, val string, ok bool) {
	m := assignRe.FindStringSubmatch(w)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// literal reports whether a word's value is known without running
// anything: no $ outside single quotes.
func literal(w string) bool {
	inSingle := false
	for _, r := range w {
		switch {
		case r == '\'':
			inSingle = !inSingle
		case r == '$' && !inSingle:
			return false
		}
	}
	return true
}

// unquote removes the shell's quotes of a word (no expansion is done).
func unquote(w string) string {
	var b strings.Builder
	var q rune
	for i := 0; i < len(w); i++ {
		c := rune(w[i])
		switch {
		case q == 0 && (c == '\'' || c == '"'):
			q = c
		case q != 0 && c == q:
			q = 0
		case c == '\\' && q != '\'' && i+1 < len(w):
			i++
			b.WriteByte(w[i])
		default:
			b.WriteByte(w[i])
		}
	}
	return b.String()
}

// SimpleCommand is one simple command of a shell block.
type SimpleCommand struct {
	// Line is where it starts in the document (1-based).
	Line int
	// Text is what the block says, from its first word to its end.
	Text string
	// Words are its words, quotes kept, redirections dropped.
	Words []string
}

// SimpleCommands splits a shell block into simple commands (see the
// package comment for how much shell this is). In a console block, only
// lines starting with "$ " are commands.
func SimpleCommands(b Block) []SimpleCommand {
	var out []SimpleCommand
	var logical []struct {
		line int
		text string
	}
	for i := 0; i < len(b.Lines); i++ {
		line, start := b.Lines[i], b.Line+i
		if b.Lang == "console" {
			t := strings.TrimLeft(line, " ")
			if !strings.HasPrefix(t, "$ ") {
				continue
			}
			line = t[2:]
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(b.Lines) {
			i++
			line = line[:len(line)-1] + " " + strings.TrimLeft(b.Lines[i], " ")
		}
		logical = append(logical, struct {
			line int
			text string
		}{start, line})
	}
	for _, l := range logical {
		out = append(out, split(l.line, l.text)...)
	}
	return out
}

// split cuts one logical line into simple commands.
func split(line int, s string) []SimpleCommand {
	var out []SimpleCommand
	var words []string
	var word strings.Builder
	inWord := false
	start := -1
	redirect := false
	flushWord := func() {
		if !inWord {
			return
		}
		if redirect {
			redirect = false
		} else {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	flushCmd := func(end int) {
		flushWord()
		if len(words) > 0 {
			out = append(out, SimpleCommand{Line: line, Text: strings.TrimSpace(s[start:end]), Words: words})
		}
		words, start, redirect = nil, -1, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if start < 0 && !unicode.IsSpace(rune(c)) && c != '#' {
			start = i
		}
		switch {
		case c == '#' && !inWord:
			flushCmd(i)
			return out
		case c == ' ' || c == '\t':
			flushWord()
		case c == '|' || c == ';' || c == '&':
			if c == '&' && i > 0 && s[i-1] == '>' {
				word.WriteByte(c)
				inWord = true
				continue
			}
			flushCmd(i)
			for i+1 < len(s) && (s[i+1] == '|' || s[i+1] == '&') {
				i++
			}
		case c == '>' || c == '<':
			// A redirection: the word it names (same or next word) is
			// dropped, and so is a file descriptor number before it.
			if inWord && isDigits(word.String()) {
				word.Reset()
				inWord = false
			} else {
				flushWord()
			}
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&') {
				i++
			}
			redirect = true
		case c == '\'' || c == '"':
			j := closeQuote(s, i)
			word.WriteString(s[i:j])
			inWord = true
			i = j - 1
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			j := closeParen(s, i+1)
			word.WriteString(s[i:j])
			inWord = true
			i = j - 1
		case c == '\\' && i+1 < len(s):
			word.WriteString(s[i : i+2])
			inWord = true
			i++
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	flushCmd(len(s))
	return out
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// closeQuote returns the index after the quote closing the one at i (or
// len(s) when it never closes).
func closeQuote(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\\' && q == '"' {
			j++
			continue
		}
		if s[j] == q {
			return j + 1
		}
	}
	return len(s)
}

// closeParen returns the index after the parenthesis closing the one at
// i, skipping quoted text (or len(s)).
func closeParen(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\'', '"':
			j = closeQuote(s, j) - 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(s)
}
