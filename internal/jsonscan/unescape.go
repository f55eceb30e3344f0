package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnescaped appends the decoded content of a raw JSON string (a
// Span's bytes, so its escapes are known to be well-formed) to dst.
//
// Like encoding/json, it replaces bytes that are not valid UTF-8 and lone
// UTF-16 surrogates (\ud800 not followed by a low surrogate) with U+FFFD. In
// strict mode it does not replace them but reports ok=false instead: keys
// use that, because mapping distinct binary keys onto one "\ufffd" key would
// invent a hot key.
func AppendUnescaped(dst, raw []byte, flags Flags, strict bool) (out []byte, ok bool) {
	if flags&Escaped == 0 {
		if flags&NonASCII == 0 || utf8.Valid(raw) {
			return append(dst, raw...), true
		}
		if strict {
			return dst, false
		}
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			switch raw[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := rune(hex4(raw[i+2:]))
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(utf8.RuneError)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = utf16.DecodeRune(r, rune(hex4(raw[i+2:])))
					}
					if r2 != utf8.RuneError {
						i += 6
						r = r2
					} else {
						// Lone surrogate: replaced, and whatever follows
						// is decoded on its own (encoding/json does the same).
						if strict {
							return dst, false
						}
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, raw[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				if strict {
					return dst, false
				}
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst, true
}

func hex4(b []byte) int {
	return HexVal(b[0])<<12 | HexVal(b[1])<<8 | HexVal(b[2])<<4 | HexVal(b[3])
}

// jsonSafe[c] is true for ASCII bytes that appear in a JSON string as-is.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendQuoted appends s as a JSON string, the inverse of AppendUnescaped.
// It escapes what JSON requires (quote, backslash, control characters) plus
// U+2028 and U+2029 (so the output is also valid JavaScript), and writes
// each byte that is not valid UTF-8 as \ufffd, exactly as encoding/json
// does. It does not escape <, > and & (encoding/json's HTML escaping):
// keyheat's records are not embedded in HTML.
func AppendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
