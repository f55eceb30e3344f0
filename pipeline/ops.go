package pipeline

// opClass is what an event's operation does to its key.
type opClass uint8

const (
	opOther opClass = iota
	opRead
	opWrite
)

// maxOpLen bounds the operations the lists may name; longer ones are never
// a read or a write.
const maxOpLen = 32

// opClassifier maps an operation to its class, case-insensitively.
type opClassifier struct {
	m map[string]opClass // upper-case operation -> class
}

func newOpClassifier(reads, writes []string) opClassifier {
	m := make(map[string]opClass, len(reads)+len(writes))
	for _, op := range reads {
		m[upperASCII(op)] = opRead
	}
	for _, op := range writes {
		m[upperASCII(op)] = opWrite
	}
	return opClassifier{m: m}
}

// classify returns op's class without allocating: logs mostly spell
// operations in upper case, which hits the map directly; others are upper-
// cased in a stack buffer.
func (c *opClassifier) classify(op string) opClass {
	if cl, ok := c.m[op]; ok || len(op) > maxOpLen {
		return cl
	}
	var buf [maxOpLen]byte
	b := buf[:len(op)]
	changed := false
	for i := 0; i < len(op); i++ {
		ch := op[i]
		if 'a' <= ch && ch <= 'z' {
			ch -= 'a' - 'A'
			changed = true
		}
		b[i] = ch
	}
	if !changed {
		return opOther
	}
	return c.m[string(b)]
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if 'a' <= ch && ch <= 'z' {
			b[i] = ch - ('a' - 'A')
		}
	}
	return string(b)
}
