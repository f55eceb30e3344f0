package hotkeys

import "math/rand/v2"

// stripeHint returns the index of the stripe a caller tries first.
func (r *Reporter) stripeHint() uint32 {
	return rand.Uint32() & r.mask
}
