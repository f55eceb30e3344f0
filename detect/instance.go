package detect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// InstanceID values besides an id of the user's.
const (
	// InstanceAuto derives the id from the host name and the lowest slot
	// free on this host (see Options.InstanceID).
	InstanceAuto = "auto"
	// InstanceNone turns static membership off.
	InstanceNone = "none"
)

// maxSlots bounds the instances of detect one host runs with
// instance_id auto; past it an instance runs without static membership.
const maxSlots = 64

// instance is this run's static group membership: the id it joins both
// groups with ("" for none) and the lock that keeps the id its own on
// this host while it runs.
type instance struct {
	id      string
	release func()
}

// resolveInstance turns Options.InstanceID into this run's id. With auto
// it is "<host>-<slot>": slot is the lowest number whose lock file, in
// the system's temporary folder, no other process holds (an exclusive
// flock, which the kernel releases when its process dies, kill -9
// included). So one instance per host is "<host>-0" run after run, a
// second one beside it "<host>-1", a restart takes the slot its
// predecessor held (or, when another instance started in between took
// it, the lowest free one), and services of one process each hold their
// own slot. Where no slot can be locked it returns no id: the groups
// then see a new member at each start, as without static membership.
func resolveInstance(o Options) (instance, string) {
	switch o.InstanceID {
	case InstanceNone:
		return instance{release: func() {}}, ""
	case InstanceAuto:
	default:
		return instance{id: o.InstanceID, release: func() {}}, ""
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return instance{release: func() {}}, fmt.Sprintf("no host name (%v)", err)
	}
	host = sanitizeID(host)
	dir := filepath.Join(os.TempDir(), "keyheat-detect")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return instance{release: func() {}}, err.Error()
	}
	var last error
	for slot := range maxSlots {
		release, err := lockSlot(filepath.Join(dir, "slot-"+strconv.Itoa(slot)+".lock"))
		if errors.Is(err, errSlotTaken) {
			continue
		}
		if err != nil {
			last = err
			break
		}
		return instance{id: host + "-" + strconv.Itoa(slot), release: release}, ""
	}
	if last == nil {
		last = fmt.Errorf("all %d slots in %s are held by running instances", maxSlots, dir)
	}
	return instance{release: func() {}}, last.Error()
}

// errSlotTaken: another process (or service of this one) holds the slot.
var errSlotTaken = errors.New("slot taken")

// sanitizeID keeps what Kafka allows in an id (letters, digits, '.', '_',
// '-'), replacing anything else with '-', and at most 240 bytes of it so
// a slot number still fits.
func sanitizeID(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, s)
	if len(s) > 240 {
		s = s[:240]
	}
	return s
}

// leaveGroup takes this instance out of the groups it was a static
// member of. franz-go does not leave a group on close with an instance
// id (a restart is meant to take the membership back), but a stop is not
// always followed by a restart: without the leave, the partitions this
// instance gave up would wait for its session timeout before another
// member got them, and an --exit-at-end run's merger would wait for it.
func (s *Service) leaveGroup(group string) {
	if s.inst.id == "" || s.fenced.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.adm.LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs(s.inst.id).Reason("detect stopping"))
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.UnknownMemberID) {
		return // gone already (franz-go left itself, or the session ended)
	}
	if err != nil {
		s.log.Warn("leave the group as static member; another member gets its partitions only after the session timeout",
			"group", group, "instance_id", s.inst.id, "session_timeout", s.cfg.SessionTimeout, "err", err)
		return
	}
	s.log.Debug("left the group", "group", group, "instance_id", s.inst.id)
}

// checkFenced stops the service when group fenced this member out: another
// member joined it with the same instance id. Two running instances with
// one id would otherwise fence each other in turn, each rejoining and
// losing its partitions again. franz-go's group goroutine calls it the
// moment it sees the fence (member.GroupConfig.OnFenced), before the
// fenced client could rejoin, which it then never does; the poll loops
// call it too for the fetch error that reports the fence, so it must be
// safe to call again, and must not block.
func (s *Service) checkFenced(group string, err error) bool {
	if !errors.Is(err, kerr.FencedInstanceID) {
		return false
	}
	// The id is the twin's now: a leave by it would take the twin out.
	s.fenced.Store(true)
	s.fail(fmt.Errorf("detect: another member joined group %s with instance id %s, which fenced this one out: give every running instance a detect.instance_id of its own "+
		"(auto gives instances on one host distinct ones; containers that share a host name need ids set)", group, s.inst.id))
	return true
}

// Until a group assigned this member anything, it says so joinWaitFirst
// after it started polling and then every joinWaitEvery.
const (
	joinWaitFirst = 2 * time.Second
	joinWaitEvery = 10 * time.Second
)

// joinWait logs what a group's loop waits for while it waits for its
// first assignment (see sayJoinWait).
type joinWait struct {
	since, said time.Time
}

// sayJoinWait logs msg when the loop has waited (waiting true) for
// joinWaitFirst, and every joinWaitEvery after that.
func (s *Service) sayJoinWait(w *joinWait, waiting bool, msg string, attrs ...any) {
	now := s.now()
	if w.since.IsZero() {
		w.since = now
	}
	if !waiting || now.Sub(w.since) < joinWaitFirst || !w.said.IsZero() && now.Sub(w.said) < joinWaitEvery {
		return
	}
	w.said = now
	s.log.Info(msg, append(attrs, "waited", now.Sub(w.since).Round(time.Second), "instance_id", s.inst.id, "session_timeout", s.cfg.SessionTimeout)...)
}
