//go:build !race

package faults

import (
	"testing"

	"github.com/keyheat/keyheat/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
