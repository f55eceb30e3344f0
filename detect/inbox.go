package detect

import (
	"sync"

	"github.com/keyheat/keyheat/schemas"
)

// ackKind says what an acknowledgement is for.
type ackKind uint8

const (
	ackWindow     ackKind = iota // a PartitionWindow reached keyheat.windows
	ackHotKey                    // one sink has a HotKeyEvent
	ackDLQ                       // a dead letter reached the DLQ
	ackReport                    // one sink has a WindowReport
	ackCandidates                // a schemas.Candidates reached keyheat.windows
)

// ack is one acknowledgement: which output, and whether it failed.
type ack struct {
	kind    ackKind
	startMs int64  // ackWindow, ackReport: the window's start
	id      string // ackHotKey, ackCandidates: the event's or batch's ID
	offset  int64  // ackDLQ: the offset of the dead-lettered record
	reason  schemas.Reason
	err     error
}

// inbox carries acknowledgements from the goroutines that learn them
// (franz-go's promise goroutine, the ClickHouse flusher) to the one
// goroutine that owns a partition's state. Posting never blocks: a
// promise goroutine that waited on a busy owner, while the owner waited
// for buffer space that only promises free, would deadlock.
type inbox struct {
	mu          sync.Mutex
	acks        []ack
	outstanding int           // expected and not yet taken
	ready       chan struct{} // holds a token while acks wait
}

func newInbox() *inbox { return &inbox{ready: make(chan struct{}, 1)} }

// expect counts n acknowledgements that will be posted.
func (b *inbox) expect(n int) {
	b.mu.Lock()
	b.outstanding += n
	b.mu.Unlock()
}

// post delivers a from any goroutine.
func (b *inbox) post(a ack) {
	b.mu.Lock()
	b.acks = append(b.acks, a)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// take moves the waiting acknowledgements to dst (reset first) and
// returns it.
func (b *inbox) take(dst []ack) []ack {
	b.mu.Lock()
	dst = append(dst[:0], b.acks...)
	clear(b.acks)
	b.acks = b.acks[:0]
	b.outstanding -= len(dst)
	b.mu.Unlock()
	return dst
}

// pending is the number of acknowledgements expected and not yet taken.
func (b *inbox) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outstanding
}
