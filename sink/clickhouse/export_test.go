package clickhouse

// PeakRows returns the most rows the writer held at once (waiting and in
// flight) since it opened.
func (w *Writer) PeakRows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peakRows
}

// HeldRows returns the rows the writer holds now.
func (w *Writer) HeldRows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queuedRows + w.inflightRows
}
