package schemas_test

import (
	"errors"
	"fmt"

	"github.com/keyheat/keyheat/schemas"
)

// A consumer of keyheat.events decodes either format, validates, and turns
// a rejection into a dead letter for keyheat.events.dlq.
func ExampleDecodeAny() {
	const nowMs = 1767225600500
	records := [][]byte{
		[]byte(`{"ts":1767225600123,"key":"user:42","app":"shop","op":"GET"}`),
		schemas.AppendBinary(nil, &schemas.AccessEvent{TimeMs: 1767225600124, Key: "user:42", Op: "SET"}),
		[]byte(`{"ts":1767225600125,"app":"shop"}`), // no key
		[]byte(`GET /index.html`), // not an event at all
	}
	var e schemas.AccessEvent
	for offset, rec := range records {
		err := schemas.DecodeAny(rec, &e)
		if err == nil {
			err = schemas.Limits{}.Validate(&e, nowMs)
		}
		if err != nil {
			src := schemas.KafkaSource("keyheat.events", 0, int64(offset))
			dl := schemas.NewDeadLetter(nowMs, src, err, rec, 0)
			fmt.Printf("%s: dead letter, reason %s\n", src, dl.Reason)
			continue
		}
		fmt.Printf("%s %s via %s\n", e.Op, e.Key, schemas.Detect(rec).Name())
	}
	// Output:
	// GET user:42 via json
	// SET user:42 via binary
	// keyheat.events:0@2: dead letter, reason empty_key
	// keyheat.events:0@3: dead letter, reason parse
}

// Config names the codec producers write with.
func ExampleCodecByName() {
	c, err := schemas.CodecByName("binary")
	if err != nil {
		panic(err)
	}
	rec := c.Append(nil, &schemas.AccessEvent{TimeMs: 1, Key: "k"})
	fmt.Printf("%s record of %d bytes, first byte %#x\n", c.Name(), len(rec), rec[0])

	_, err = schemas.CodecByName("avro")
	fmt.Println(err)
	// Output:
	// binary record of 19 bytes, first byte 0xc1
	// unknown event codec "avro": use "json" or "binary"
}

func ExampleAppendDeadLetter() {
	err := &schemas.InvalidEventError{Reason: schemas.ReasonParse, Detail: "expected '{'"}
	d := schemas.NewDeadLetter(1767225600456, schemas.SourceStdin, err, []byte("GET /x HTTP/1.1"), 8)
	fmt.Println(string(schemas.AppendDeadLetter(nil, &d)))

	var back schemas.DeadLetter
	if err := schemas.DecodeDeadLetter([]byte(`{"reason":"parse","raw":[]}`), &back); errors.Is(err, schemas.ErrMalformedDeadLetter) {
		fmt.Println(err)
	}
	// Output:
	// {"ts":1767225600456,"source":"stdin","reason":"parse","detail":"expected '{'","raw":"GET /x H","truncated":true,"orig_len":15}
	// malformed dead letter: "raw" must be a string at offset 24
}
