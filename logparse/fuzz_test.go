package logparse

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/keyheat/keyheat/schemas"
)

// checkParse is the property every parser keeps on any input: no panic,
// an accepted line yields events that all have a key and differ only in
// it, a skipped or rejected one yields none, and a rejected one says why
// with a Reason. Parse appends to dst, never overwriting what it held.
func checkParse(t *testing.T, p Parser, line []byte) {
	prev := schemas.AccessEvent{Key: "earlier"}
	evs, dropped, err := p.Parse([]schemas.AccessEvent{prev}, line)
	if len(evs) == 0 || evs[0] != prev {
		t.Fatalf("%s: %q: Parse did not keep dst's events", p.Name(), line)
	}
	evs = evs[1:]
	if err != nil && (len(evs) > 0 || dropped != 0) {
		t.Fatalf("%s: %q: error %v with %d events, dropped %v", p.Name(), line, err, len(evs), dropped)
	}
	switch {
	case err == nil:
		if len(evs) == 0 {
			t.Fatalf("%s accepted %q without an event", p.Name(), line)
		}
		for _, e := range evs {
			if e.Key == "" {
				t.Fatalf("%s accepted %q with an empty key", p.Name(), line)
			}
			e.Key = evs[0].Key
			if e != evs[0] {
				t.Fatalf("%s: %q: events differ in more than the key: %+v, %+v", p.Name(), line, e, evs[0])
			}
		}
	case errors.Is(err, ErrSkip):
	default:
		var ie *schemas.InvalidEventError
		if !errors.As(err, &ie) {
			t.Fatalf("%s: %q: error %v is not an *InvalidEventError", p.Name(), line, err)
		}
	}
}

// Seed corpora live in testdata/fuzz/<FuzzName>/; these f.Add calls only
// keep a seed in code for each shape.

func FuzzCombined(f *testing.F) {
	f.Add([]byte(`127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif?x=1 HTTP/1.0" 200 2326 "-" "Mozilla/4.08"`))
	byPath, _ := NewCombined(CombinedConfig{Key: KeyPath}, "")
	byQuery, _ := NewCombined(CombinedConfig{Key: KeyQuery, QueryParam: "x"}, "")
	plain, _ := NewCombined(CombinedConfig{}, "")
	f.Fuzz(func(t *testing.T, line []byte) {
		checkParse(t, plain, line)
		checkParse(t, byPath, line)
		checkParse(t, byQuery, line)
	})
}

func FuzzJSON(f *testing.F) {
	f.Add([]byte(`{"key":"user:1","time":1742220131250,"op":"GET","bytes":12,"app":"a","extra":[1,{"b":null}]}`))
	p, _ := NewJSON(DefaultJSONConfig(), "")
	nested, _ := NewJSON(JSONConfig{Key: "req.key", Time: "ts", Op: "req.op"}, "")
	f.Fuzz(func(t *testing.T, line []byte) {
		checkParse(t, p, line)
		checkParse(t, nested, line)
		// Whatever the json parser accepts is JSON.
		if _, _, err := p.Parse(nil, line); err == nil || schemas.ReasonOf(err) != schemas.ReasonParse {
			if !json.Valid(line) {
				t.Fatalf("json accepted %q, which is not JSON", line)
			}
		}
	})
}

func FuzzRedis(f *testing.F) {
	f.Add([]byte(`1339518083.107412 [0 127.0.0.1:60866] "get" "k\x00\"y"`))
	p := NewRedis("app")
	f.Fuzz(func(t *testing.T, line []byte) { checkParse(t, p, line) })
}

func FuzzRegex(f *testing.F) {
	f.Add([]byte(`2025-03-17T14:02:11Z GET user:1 512`))
	p, err := NewRegex(RegexConfig{Pattern: `^(?P<time>\S+) (?P<op>\w+) (?P<key>\S*) (?P<bytes>\S+)$`}, "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkParse(t, p, line) })
}
