// Package jsonscan is keyheat's one JSON scanner: a validating,
// allocation-free tokenizer over a byte slice, the string unescaper and
// quoter that go with it, and nothing else. schemas decodes AccessEvent and
// DeadLetter records with it; logparse reads JSON access-log lines with it.
//
// It is hand-written, and not a library, because of what its two callers
// need at once, measured on the same machine in the same run:
//
//   - schemas.DecodeJSON must stay near 250 ns and one allocation per event
//     while validating the whole record (RFC 8259, values of skipped
//     members included), rejecting a key that is not UTF-8 instead of
//     replacing it, and copying every string into one backing array. On a
//     typical event, valyala/fastjson took 2.4–3.5 times as long,
//     tidwall/gjson (Valid plus ForEach) about 3 times, and
//     buger/jsonparser, which does not even validate, about twice.
//   - logparse reads configured dotted paths (req.key) from lines of any
//     shape at well over a million lines per second on one core: gjson's
//     one scan per path ran at about a third of that, jsonparser's EachKey
//     at about half, fastjson at half to two thirds with five allocations
//     a line.
//
// A shared scanner keeps one grammar, one set of escape rules and one fuzz
// target for both, where the libraries would each still need keyheat's
// own validation and copying on top.
//
// The Scanner is a position over Src that callers may read and move
// themselves: the event decoder inlines the compact, plain-ASCII path that
// producers write and hands the position to these methods for everything
// else (whitespace, escapes, fractions, null, unknown members).
//
// Member names and number texts are never copied: MemberName may return a
// string over Src, which is valid only while Src is unchanged, and must only
// be compared or parsed on the spot, never kept. Anything a caller keeps it
// copies with AppendUnescaped.
package jsonscan
