package sketch

import (
	"errors"
	"fmt"
)

// ErrCorrupt is returned (wrapped) by every UnmarshalBinary in this package
// when the input is truncated, has trailing bytes, an unknown version, values
// that contradict each other, or a checksum mismatch. Test for it with
// errors.Is. A corrupt summary must be dropped or re-fetched; it cannot be
// repaired.
var ErrCorrupt = errors.New("sketch: corrupt encoding")

// ErrDimensionMismatch is matched (via errors.Is) by every *MismatchError. It
// surfaces from Merge when the two structures were built with different
// dimensions, seeds or precisions, so their counters do not describe the
// same hash space and cannot be added.
var ErrDimensionMismatch = errors.New("sketch: dimension mismatch")

// ErrInvalidConfig is matched (via errors.Is) by every error returned from a
// config's Validate method and from the New... constructors.
var ErrInvalidConfig = errors.New("sketch: invalid config")

// MismatchError reports a Merge between two structures that do not share a
// layout. It names the structure and both layouts so the operator can see
// which side is configured differently (usually two detect instances running
// different rule configs). It matches ErrDimensionMismatch with errors.Is.
type MismatchError struct {
	// Kind names the structure: "count-min", "top-k" or "cardinality".
	Kind string
	// Depth, Width and Seed describe the receiver. For a cardinality
	// estimate Depth carries the precision and Width and Seed are zero.
	Depth, Width int
	Seed         uint64
	// OtherDepth, OtherWidth and OtherSeed describe the argument of Merge.
	OtherDepth, OtherWidth int
	OtherSeed              uint64
}

// Error names both layouts and what to check.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("sketch: cannot merge %s %dx%d seed %#x with %dx%d seed %#x: "+
		"both sides must use the same dimensions and seed (check that every instance runs the same rule config)",
		e.Kind, e.Depth, e.Width, e.Seed, e.OtherDepth, e.OtherWidth, e.OtherSeed)
}

// Is makes errors.Is(err, ErrDimensionMismatch) true for a *MismatchError.
func (e *MismatchError) Is(target error) bool { return target == ErrDimensionMismatch }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
