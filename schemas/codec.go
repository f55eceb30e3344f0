package schemas

import (
	"fmt"
	"strconv"
	"strings"
)

// Codec is one wire format for AccessEvent, so that config can pick the
// format of keyheat.events by name ("json" or "binary") and producers and
// consumers are written once against this interface.
type Codec interface {
	// Name is the codec's config name: "json" or "binary".
	Name() string
	// Append appends the encoding of e to dst and returns the extended buffer.
	Append(dst []byte, e *AccessEvent) []byte
	// Decode decodes one record into e, overwriting all its fields. Errors
	// are *InvalidEventError values (ReasonParse for malformed input).
	Decode(src []byte, e *AccessEvent) error
}

// JSONCodec is the JSON wire format (AppendJSON, DecodeJSON), for
// producers and readers of keyheat.events other than keyheat's own:
// anything can produce and read it.
type JSONCodec struct{}

// BinaryCodec is the compact binary wire format (AppendBinary,
// DecodeBinary), for throughput and for keys that are not UTF-8: what
// keyheat's own producers write by default.
type BinaryCodec struct{}

// JSON and Binary are the two codecs; their types carry no state, so these
// values are only a convenient spelling.
var (
	JSON   JSONCodec
	Binary BinaryCodec
)

var (
	_ Codec = JSONCodec{}
	_ Codec = BinaryCodec{}
)

// Name returns "json".
func (JSONCodec) Name() string { return "json" }

// Append is AppendJSON.
func (JSONCodec) Append(dst []byte, e *AccessEvent) []byte { return AppendJSON(dst, e) }

// Decode is DecodeJSON.
func (JSONCodec) Decode(src []byte, e *AccessEvent) error { return DecodeJSON(src, e) }

// Name returns "binary".
func (BinaryCodec) Name() string { return "binary" }

// Append is AppendBinary.
func (BinaryCodec) Append(dst []byte, e *AccessEvent) []byte { return AppendBinary(dst, e) }

// Decode is DecodeBinary.
func (BinaryCodec) Decode(src []byte, e *AccessEvent) error { return DecodeBinary(src, e) }

// Codecs returns every codec: the list config validates events.codec
// against and documents.
func Codecs() []Codec { return []Codec{JSON, Binary} }

// CodecByName returns the codec called name (its Name, any case), as a
// config file or flag spells it.
func CodecByName(name string) (Codec, error) {
	var names []string
	for _, c := range Codecs() {
		if strings.EqualFold(name, c.Name()) {
			return c, nil
		}
		names = append(names, strconv.Quote(c.Name()))
	}
	return nil, fmt.Errorf("unknown event codec %q: use %s", name, strings.Join(names, " or "))
}

// Detect returns the codec that wrote src: Binary when src starts with
// BinaryMagic, JSON otherwise (a byte JSON can never start with, see
// AppendBinary). It looks only at the first byte; decoding still checks
// the rest.
func Detect(src []byte) Codec {
	if len(src) > 0 && src[0] == BinaryMagic {
		return Binary
	}
	return JSON
}

// DecodeAny decodes a record written by either codec, so a consumer keeps
// working while producers switch format.
func DecodeAny(src []byte, e *AccessEvent) error {
	if len(src) > 0 && src[0] == BinaryMagic {
		return DecodeBinary(src, e)
	}
	return DecodeJSON(src, e)
}

// DecodeAnyShared is DecodeAny without the copy of a binary event's
// strings: they point into src, which must then stay unchanged for as
// long as any of them is used, and keep it alive (all of it, and the
// buffer it is part of) for as long as any is kept. It is for a consumer
// that handles an event at once and copies what it keeps beyond it, on
// buffers no one reuses (a franz-go record's Value): one allocation and
// copy less per event. A JSON event's strings are copied, as DecodeJSON
// does.
func DecodeAnyShared(src []byte, e *AccessEvent) error {
	if len(src) > 0 && src[0] == BinaryMagic {
		if err := decodeBinary(src, e, true); err != nil {
			e.Reset()
			return err
		}
		return nil
	}
	return DecodeJSON(src, e)
}
