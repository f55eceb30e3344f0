//go:build race

package hotring

const raceEnabled = true
