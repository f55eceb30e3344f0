// Package topics makes sure the Kafka topics a keyheat command writes to
// exist before it produces anything: a producer pointed at a missing topic
// otherwise fails every record, one by one, after it has read its input.
// It does not choose topic names or settings; callers pass Specs built
// from their config.
package topics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Spec is a topic a command needs.
type Spec struct {
	Name string
	// Partitions and ReplicationFactor are used only when the topic is
	// created; an existing topic is never changed. ReplicationFactor -1
	// means the broker's default.
	Partitions        int32
	ReplicationFactor int16
	// Configs are topic configs set at creation, e.g. cleanup.policy:
	// compact for a registry keyed by key.
	Configs map[string]string
}

// CheckName applies Kafka's rules for topic names, so that a bad name
// fails where it is configured, with its key, instead of at the first
// produce. The errors say what is wrong; callers add which name it is for.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a legal topic name", name)
	case len(name) > 249:
		return fmt.Errorf("%d characters; Kafka allows at most 249", len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q has %q; Kafka allows only letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return nil
}

// MissingError says which topics do not exist when Ensure may not create
// them.
type MissingError struct {
	Topics []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("kafka topics %s do not exist: create them, or set kafka.create_topics: true to let keyheat create them",
		strings.Join(e.Topics, ", "))
}

// Ensure returns nil when every topic in specs exists and has a leader for
// every partition. Missing topics are created when create is true (a topic
// created concurrently by someone else counts as existing) and waited for;
// with create false they are reported as a *MissingError.
func Ensure(ctx context.Context, cl *kgo.Client, create bool, specs ...Spec) error {
	adm := kadm.NewClient(cl)
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	missing, err := listMissing(ctx, cl, names)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	if !create {
		return &MissingError{Topics: missing}
	}
	var errs []error
	for _, s := range specs {
		if !slices.Contains(missing, s.Name) {
			continue
		}
		var configs map[string]*string
		if len(s.Configs) > 0 {
			configs = make(map[string]*string, len(s.Configs))
			for _, k := range slices.Sorted(maps.Keys(s.Configs)) {
				v := s.Configs[k]
				configs[k] = &v
			}
		}
		resp, err := adm.CreateTopic(ctx, s.Partitions, s.ReplicationFactor, configs, s.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			msg := ""
			if resp.ErrMessage != "" {
				msg = " (" + resp.ErrMessage + ")"
			}
			errs = append(errs, fmt.Errorf("create topic %s%s: %w", s.Name, msg, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// CreateTopics answers once the controller has the topic; a broker
	// may show it, or its partitions' leaders, a moment later. Wait, so a
	// caller that produces or consumes next finds it.
	for {
		missing, err := listMissing(ctx, cl, names)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for created topics %s to appear: %w", strings.Join(missing, ", "), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// listMissing returns the names that the brokers do not know, or know
// without a leader for every partition yet, in the order given. It sends
// its own metadata request: kadm's listings read the client's metadata
// cache, which can be seconds older than a topic just created.
func listMissing(ctx context.Context, cl *kgo.Client, names []string) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // a check must not create what it checks
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list kafka topics: %w", err)
	}
	ready := make(map[string]bool, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.LeaderNotAvailable):
			continue
		case err != nil:
			return nil, fmt.Errorf("kafka topic %s: %w", *t.Topic, err)
		}
		ok := len(t.Partitions) > 0
		for _, p := range t.Partitions {
			if p.Leader < 0 || kerr.ErrorForCode(p.ErrorCode) != nil {
				ok = false
			}
		}
		ready[*t.Topic] = ok
	}
	var missing []string
	for _, n := range names {
		if !ready[n] {
			missing = append(missing, n)
		}
	}
	return missing, nil
}
