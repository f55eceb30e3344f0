// Package ledger keeps the books of a detect stage's outputs in flight:
// each output (a window summary, a hot-key event, a dead letter, a
// report) goes to one or more destinations (a Kafka topic, ClickHouse,
// the Parquet archive), and is done once every one of them acknowledged
// it. The stage's owner goroutine learns, in the order they came, which
// outputs are done, which failed, and how far the outputs it held
// offsets for let the partition commit.
//
// Destinations acknowledge in one of two ways. Kafka and ClickHouse call
// an acknowledgement function from their own goroutines, whenever they
// know: Sent gives it, and it never blocks (a producer's promise
// goroutine that waited on a busy owner, while the owner waited for
// buffer space only promises free, would deadlock). The archive makes
// what was appended durable when its owner flushes it, on the owner's
// goroutine: Archive acknowledges everything appended since the last
// flush at once. Only the first kind is "in flight" (Pending): a stage
// waits for those, then flushes. Fanout sends each output to some of
// each kind (Destination, Appender) and records it once, for all of
// them; replay's outputs go through one.
//
// A failed acknowledgement never completes its output: whatever that
// output holds back (a core's commit point, an offset given to AddHeld)
// stays held, so no commit passes it; the stage is expected to stop and
// let a restart read again from the commit.
//
// What an output is for, and what its completion moves (a core's commit
// point, a merger's), are the stage's business, not the ledger's.
package ledger
