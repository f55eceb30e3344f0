package detect

// sizeHint sizes the buffer a record's value is encoded into from the
// last one of its kind: a window's summary or report is near the size of
// the one before, and encoded into a buffer of that size it takes one
// allocation rather than a dozen of doubling growth (the value goes to
// the producer, so the buffer cannot be reused).
type sizeHint struct{ last int }

// buf returns an empty buffer with room for the last value and an eighth.
func (h *sizeHint) buf() []byte {
	if h.last == 0 {
		return nil
	}
	return make([]byte, 0, h.last+h.last/8)
}

// saw records the size of a value encoded.
func (h *sizeHint) saw(v []byte) { h.last = min(len(v), maxRecordBytes) }
