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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

// MissingError says which topics do not exist when Ensure may not create
// them.
type MissingError struct {
	Topics []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("kafka topics %s do not exist: create them, or set kafka.create_topics: true to let keyheat create them",
		strings.Join(e.Topics, ", "))
}

// Ensure returns nil when every topic in specs exists. Missing topics are
// created when create is true (a topic created concurrently by someone else
// counts as existing); with create false they are reported as a
// *MissingError.
func Ensure(ctx context.Context, cl *kgo.Client, create bool, specs ...Spec) error {
	adm := kadm.NewClient(cl)
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	missing, err := listMissing(ctx, adm, names)
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
	// Producing right after creation can meet brokers whose metadata does
	// not show the topic yet; franz-go retries UNKNOWN_TOPIC_OR_PARTITION
	// with fresh metadata, so there is nothing to wait for here (and
	// listing again would read the client's cached metadata anyway).
	return errors.Join(errs...)
}

// listMissing returns the names that the brokers do not know (or know
// without leaders yet), in the order given.
func listMissing(ctx context.Context, adm *kadm.Client, names []string) ([]string, error) {
	tds, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list kafka topics: %w", err)
	}
	var missing []string
	for _, name := range names {
		td, ok := tds[name]
		switch {
		case !ok, errors.Is(td.Err, kerr.UnknownTopicOrPartition), td.Err == nil && len(td.Partitions) == 0:
			missing = append(missing, name)
		case td.Err != nil:
			return nil, fmt.Errorf("kafka topic %s: %w", name, td.Err)
		default:
			for _, p := range td.Partitions {
				if p.Leader < 0 {
					missing = append(missing, name)
					break
				}
			}
		}
	}
	return missing, nil
}
