package logparse

import (
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// Fields is a set of the optional event fields a line may carry, one bit
// per field. Parse reports with it the fields it dropped because they did
// not parse.
type Fields uint16

// The optional fields, as the bits of a Fields.
const (
	FieldOp        Fields = 1 << fOp
	FieldBytes     Fields = 1 << fBytes
	FieldApp       Fields = 1 << fApp
	FieldStatus    Fields = 1 << fStatus
	FieldClient    Fields = 1 << fClient
	FieldNode      Fields = 1 << fNode
	FieldLatencyUs Fields = 1 << fLatency
)

// All yields each field in f on its own, in a fixed order, so a caller can
// count dropped fields per field:
//
//	for f := range dropped.All() {
//		droppedTotal.WithLabelValues(f.String()).Inc()
//	}
func (f Fields) All() iter.Seq[Fields] {
	return func(yield func(Fields) bool) {
		for rest := f; rest != 0; rest &= rest - 1 {
			if !yield(1 << bits.TrailingZeros16(uint16(rest))) {
				return
			}
		}
	}
}

// String returns the names of the fields in f as config spells them,
// comma-separated: "bytes,status". It returns "" for no field.
func (f Fields) String() string {
	var b strings.Builder
	for one := range f.All() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if i := bits.TrailingZeros16(uint16(one)); i < len(fieldNames) && fieldNames[i] != "" {
			b.WriteString(fieldNames[i])
		} else {
			b.WriteString("bit" + strconv.Itoa(i)) // not a field: Parse never sets it
		}
	}
	return b.String()
}
