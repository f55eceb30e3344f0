package pipeline

// ranking is a total order on T: before reports whether a ranks before b.
// bestN takes it as a type parameter rather than a func value so that a
// caller's order is a plain method on a value it already has (no closure
// to build per use).
type ranking[T any] interface {
	before(a, b *T) bool
}

// bestN keeps the n values that rank first among those offered, in a heap
// whose root is the worst of them: once it is full, most values are
// settled by one comparison with the root, so choosing n of m values costs
// about m comparisons rather than a sort. Its storage, room for n values
// and one more, is reused from one reset to the next.
//
// Since the order is total, which values are kept and the order sorted
// returns them in do not depend on the order they were offered in.
type bestN[T any, R ranking[T]] struct {
	r R
	n int
	h []T
}

// reset empties b to keep the n best by r of the values offered next.
func (b *bestN[T, R]) reset(n int, r R) {
	b.r, b.n, b.h = r, n, b.h[:0]
}

// worst returns the kept value that ranks last once b holds n values (a
// value has to rank before it to be kept), and nil while b has room or
// when n is 0. A caller may compare a cheap part of its order with it to
// skip most offers.
func (b *bestN[T, R]) worst() *T {
	if len(b.h) < b.n || len(b.h) == 0 {
		return nil
	}
	return &b.h[0]
}

// offer keeps v if it ranks among the n best offered since reset.
func (b *bestN[T, R]) offer(v T) {
	// v is compared from the slot past the kept values: a pointer to v
	// itself would escape through the order's method and cost an
	// allocation per offer.
	h := append(b.h, v)
	last := len(h) - 1
	b.h = h[:last]
	switch {
	case last < b.n:
		b.h = h
		b.up(last)
	case last > 0 && b.r.before(&h[last], &h[0]):
		b.sink(h[last], last)
	}
}

// replaceWorst keeps v, which the caller found to rank before worst(), in
// its place: what offer does then, without comparing them again.
func (b *bestN[T, R]) replaceWorst(v T) {
	b.sink(v, len(b.h))
}

// sorted returns the kept values, best first, and empties b. The slice is
// b's storage: the next offers overwrite it.
func (b *bestN[T, R]) sorted() []T {
	h := b.h
	for end := len(h) - 1; end > 0; end-- {
		// The root, the worst of h[:end+1], goes to end, and what
		// stood there takes its place in h[:end].
		v := h[end]
		h[end] = h[0]
		b.sink(v, end)
	}
	b.h = h[:0]
	return h
}

// sink puts v at the root of the heap h[:size] in place of what is there.
// The root's place moves down along the worse child to a leaf, one
// comparison a level, and v goes there and moves up the few places it has
// to: a value's place is mostly near the leaves, where most of a heap is,
// so this compares less than sifting v down at two comparisons a level
// (Floyd's heapsort).
func (b *bestN[T, R]) sink(v T, size int) {
	h := b.h
	i := 0
	for {
		l := 2*i + 1
		if l >= size {
			break
		}
		w := l
		if r := l + 1; r < size && b.r.before(&h[l], &h[r]) {
			w = r
		}
		h[i] = h[w]
		i = w
	}
	h[i] = v
	b.up(i)
}

// up moves h[j] towards the root while it ranks after its parent.
func (b *bestN[T, R]) up(j int) {
	h := b.h
	for j > 0 {
		p := (j - 1) / 2
		if !b.r.before(&h[p], &h[j]) {
			return
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
}
