//go:build !unix

package detect

import "errors"

// lockSlot: no flock here; instance_id auto runs without static
// membership.
func lockSlot(string) (func(), error) {
	return nil, errors.New("instance_id auto needs flock; set detect.instance_id")
}
