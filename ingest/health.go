package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaHealth tells whether the brokers answer, from the hooks of the
// clients that talk to them (ProducerConfig.Health), and says so in one
// plain log line when they stop answering and one when they are back,
// with the number of lines waiting meanwhile. franz-go retries on its own
// and logs each retry; those lines go to debug while the outage is known,
// so the log says what happened once instead of every few seconds.
//
// Kafka counts as unreachable once a connection attempt or request has
// failed and no broker has answered for unreachableAfter: one broker of
// several going away, or a single slow request, is not an outage.
type KafkaHealth struct {
	log     *slog.Logger
	brokers string
	now     func() time.Time

	lastOKNs   atomic.Int64 // last answer from any broker, Unix ns
	lastErrNs  atomic.Int64 // last failed connection or request, Unix ns
	firstErrNs atomic.Int64 // first failure after the last answer, Unix ns
	lastErr    atomic.Pointer[string]

	downNow atomic.Bool   // down, for the hooks
	kick    chan struct{} // an answer came while down: look now

	mu           sync.Mutex
	waiting      func() int64
	down         bool
	downSinceNs  int64
	lastRemindNs int64
	reachable    prometheus.Gauge
}

// unreachableAfter is how long no broker may answer after a failure before
// Kafka counts as unreachable; remindEvery is how often a long outage is
// mentioned again.
const (
	unreachableAfter = 2 * time.Second
	remindEvery      = time.Minute
)

// NewKafkaHealth returns a KafkaHealth for the brokers named (for its
// messages), logging to log and exporting the gauge
// keyheat_ingest_kafka_reachable to reg; nil log discards, nil reg
// registers nothing.
func NewKafkaHealth(brokers []string, log *slog.Logger, reg prometheus.Registerer) *KafkaHealth {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &KafkaHealth{log: log, brokers: strings.Join(brokers, ","), now: time.Now, waiting: func() int64 { return 0 }, kick: make(chan struct{}, 1),
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "keyheat", Subsystem: "ingest", Name: "kafka_reachable",
			Help: "1 while the Kafka brokers answer, 0 while ingest waits for them."})}
	h.reachable.Set(1)
	if reg != nil {
		reg.MustRegister(h.reachable)
	}
	return h
}

// SetWaiting sets how the outage lines count the lines waiting for Kafka
// (read, not yet delivered).
func (h *KafkaHealth) SetWaiting(fn func() int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting = fn
}

// Ready reports whether Kafka answers, and when not, for how long it has
// not: what a readiness probe shows.
func (h *KafkaHealth) Ready() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		return true, "kafka reachable"
	}
	return false, fmt.Sprintf("kafka unreachable for %s (%s)", h.since(h.downSinceNs), h.errText())
}

// Unreachable reports whether Kafka is known to be unreachable now.
func (h *KafkaHealth) Unreachable() bool { return h.downNow.Load() }

// Run checks the state every interval, and as soon as a broker answers
// during an outage, until ctx ends; then once more, so that a recovery is
// said before the process exits.
func (h *KafkaHealth) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			h.check()
			return
		case <-tick.C:
		case <-h.kick:
		}
		h.check()
	}
}

// check compares the hooks' evidence with the state and logs a change.
func (h *KafkaHealth) check() {
	nowNs := h.now().UnixNano()
	ok, bad, first := h.lastOKNs.Load(), h.lastErrNs.Load(), h.firstErrNs.Load()
	failing := bad > ok && nowNs-first >= int64(unreachableAfter)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case failing && !h.down:
		h.down, h.downSinceNs, h.lastRemindNs = true, first, nowNs
		h.downNow.Store(true)
		h.reachable.Set(0)
		h.log.Warn(fmt.Sprintf("kafka unreachable, waiting for it; %d lines waiting, nothing read is dropped", h.waiting()),
			"brokers", h.brokers, "err", h.errText(), "hint", "is kafka.brokers right and the broker up?")
	case failing && nowNs-h.lastRemindNs >= int64(remindEvery):
		h.lastRemindNs = nowNs
		h.log.Warn(fmt.Sprintf("kafka unreachable for %s, %d lines waiting", h.since(h.downSinceNs), h.waiting()),
			"brokers", h.brokers, "err", h.errText())
	case !failing && h.down && ok > bad:
		h.down = false
		h.downNow.Store(false)
		h.reachable.Set(1)
		h.log.Info(fmt.Sprintf("kafka reachable again after %s; %d lines waiting go out now", h.since(h.downSinceNs), h.waiting()),
			"brokers", h.brokers)
	}
}

func (h *KafkaHealth) since(ns int64) time.Duration {
	return time.Duration(h.now().UnixNano() - ns).Round(time.Second)
}

func (h *KafkaHealth) errText() string {
	if e := h.lastErr.Load(); e != nil {
		return *e
	}
	return "no answer"
}

func (h *KafkaHealth) ok() {
	h.lastOKNs.Store(h.now().UnixNano())
	if h.downNow.Load() {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

func (h *KafkaHealth) fail(err error) {
	s := err.Error()
	h.lastErr.Store(&s)
	nowNs := h.now().UnixNano()
	if h.lastErrNs.Load() <= h.lastOKNs.Load() {
		h.firstErrNs.Store(nowNs) // the first failure since the last answer
	}
	h.lastErrNs.Store(nowNs)
}

// hook returns the franz-go hooks that feed h.
func (h *KafkaHealth) hook() kgo.Hook { return healthHook{h} }

type healthHook struct{ h *KafkaHealth }

var (
	_ kgo.HookBrokerConnect = healthHook{}
	_ kgo.HookBrokerRead    = healthHook{}
	_ kgo.HookBrokerWrite   = healthHook{}
)

func (k healthHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		k.h.fail(err)
	}
}

func (k healthHook) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		k.h.fail(err)
		return
	}
	k.h.ok()
}

func (k healthHook) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		k.h.fail(err)
	}
}
