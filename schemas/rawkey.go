package schemas

import (
	"encoding/json"
	"unicode/utf8"
)

// Keys in JSON messages.
//
// A key need not be UTF-8 (events.codec: binary with
// events.allow_binary_keys: true), but a JSON string is text: encoding/json
// replaces every invalid byte with U+FFFD, so "a\xff" and "a\xfe" would
// both arrive as "a\uFFFD" and be counted, deduplicated and stored as one
// key. The JSON messages that carry keys (KeyCount, KeyAdvice, HotKeyEvent)
// therefore add, for a key that is not valid UTF-8 only, the exact bytes
// in standard base64 next to the readable field: "key_b64" beside "key"
// (and "id_b64" beside a hot-key event's "id", which contains the key).
// The readable field keeps its U+FFFD form for people and for readers that
// do not know the extra field; the decoders here prefer the base64 one, so
// a message read back holds the key it was written with. A UTF-8 key is
// written as before, without the extra field.

// rawIfNotText returns s's bytes when JSON cannot carry s as it is (it is
// not valid UTF-8), nil otherwise.
func rawIfNotText(s string) []byte {
	if utf8.ValidString(s) {
		return nil
	}
	return []byte(s)
}

// keyCountFields is KeyCount without its JSON methods.
type keyCountFields KeyCount

type keyCountJSON struct {
	keyCountFields
	KeyB64 []byte `json:"key_b64,omitempty"`
}

// MarshalJSON writes k's fields, with "key_b64" when Key is not UTF-8
// (see the comment on keys in JSON messages in rawkey.go).
func (k KeyCount) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(k.Key) {
		return json.Marshal(keyCountFields(k))
	}
	return json.Marshal(keyCountJSON{keyCountFields(k), []byte(k.Key)})
}

// UnmarshalJSON reads what MarshalJSON writes; "key_b64", when present,
// is the key.
func (k *KeyCount) UnmarshalJSON(b []byte) error {
	var j keyCountJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*k = KeyCount(j.keyCountFields)
	if j.KeyB64 != nil {
		k.Key = string(j.KeyB64)
	}
	return nil
}

type keyAdviceFields KeyAdvice

type keyAdviceJSON struct {
	keyAdviceFields
	KeyB64 []byte `json:"key_b64,omitempty"`
}

// MarshalJSON writes a's fields, with "key_b64" when Key is not UTF-8.
func (a KeyAdvice) MarshalJSON() ([]byte, error) {
	return json.Marshal(keyAdviceJSON{keyAdviceFields(a), rawIfNotText(a.Key)})
}

// UnmarshalJSON reads what MarshalJSON writes; "key_b64", when present,
// is the key.
func (a *KeyAdvice) UnmarshalJSON(b []byte) error {
	var j keyAdviceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*a = KeyAdvice(j.keyAdviceFields)
	if j.KeyB64 != nil {
		a.Key = string(j.KeyB64)
	}
	return nil
}

type hotKeyFields HotKeyEvent

type hotKeyJSON struct {
	hotKeyFields
	IDB64  []byte `json:"id_b64,omitempty"`
	KeyB64 []byte `json:"key_b64,omitempty"`
}

// MarshalJSON writes h's fields, with "key_b64" and "id_b64" when Key is
// not UTF-8.
func (h HotKeyEvent) MarshalJSON() ([]byte, error) {
	return json.Marshal(hotKeyJSON{hotKeyFields(h), rawIfNotText(h.ID), rawIfNotText(h.Key)})
}

// UnmarshalJSON reads what MarshalJSON writes; "key_b64" and "id_b64",
// when present, are the key and the ID.
func (h *HotKeyEvent) UnmarshalJSON(b []byte) error {
	var j hotKeyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = HotKeyEvent(j.hotKeyFields)
	if j.IDB64 != nil {
		h.ID = string(j.IDB64)
	}
	if j.KeyB64 != nil {
		h.Key = string(j.KeyB64)
	}
	return nil
}
