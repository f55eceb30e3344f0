package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/controlplane/chsource"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// operatorAPI is the control plane as a detect instance serves it: the
// registry followed as an application follows it, a producer for the
// operators' changes, and the routes over them.
type operatorAPI struct {
	follower *hotkeys.Follower
	producer *kgo.Client
	history  *controlplane.History
	clients  *controlplane.Clients
	feed     *controlplane.Feed
	feedDone chan struct{}
	chPool   driver.Conn
	server   *controlplane.Server
	dash     *controlplane.Dashboard
	handler  http.Handler
}

// newOperatorAPI builds the API of cfg's api section over the registry
// topic cfg.Kafka.Topics.Hotkeys. Nothing listens yet; close what it
// returns.
func newOperatorAPI(cfg *config.Config, clientOpts []kgo.Opt, reg prometheus.Registerer, log *slog.Logger) (*operatorAPI, error) {
	token, err := controlplane.LoadToken(cfg.API.Token, cfg.API.TokenFile)
	if err != nil {
		return nil, err
	}
	log = log.With("component", "api")
	a := &operatorAPI{}
	a.follower, err = hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: clientOpts, Topic: cfg.Kafka.Topics.Hotkeys,
		Logger: log, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	a.producer, err = kgo.NewClient(clientOpts...)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("api: kafka client: %w", err)
	}
	if a.history, err = controlplane.NewHistory(controlplane.HistoryConfig{Registerer: reg}); err != nil {
		a.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	// Every instance reads the reports and alerts back from Kafka, not
	// only the one merging, so they all answer alike.
	a.feed, err = controlplane.NewFeed(controlplane.FeedConfig{ClientOpts: clientOpts, Reports: cfg.Kafka.Topics.Reports,
		Hotkeys: cfg.Kafka.Topics.Hotkeys, History: a.history, Logger: log, Registerer: reg})
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	a.feedDone = make(chan struct{})
	go func() {
		defer close(a.feedDone)
		_ = a.feed.Run(context.Background()) // until Close closes its client
	}()
	a.clients, err = controlplane.NewClients(controlplane.ClientsConfig{ClientOpts: clientOpts, Topic: cfg.Kafka.Topics.ClientStats,
		Logger: log, Registerer: reg})
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	var source controlplane.ReportSource
	if cfg.ClickHouse.Enabled {
		// Windows older than memory holds come from ClickHouse; while it
		// is down the answers say so and carry what memory has.
		if a.chPool, err = clickhouse.OpenPool(cfg.ClickHouse.Options); err != nil {
			a.Close()
			return nil, fmt.Errorf("api: %w", err)
		}
		if source, err = chsource.New(chsource.Config{Conn: a.chPool, Database: cfg.ClickHouse.Database}); err != nil {
			a.Close()
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	a.server, err = controlplane.New(controlplane.Config{Follower: a.follower, Producer: a.producer, Token: token,
		ProtectReads: cfg.API.ProtectReads, MaxTTL: cfg.API.MaxTTL, MaxKeyBytes: cfg.Events.Limits.MaxKeyBytes,
		History: a.history, ReportSource: source, Clients: a.clients, Logger: log, LogRawKeys: cfg.Log.RawKeys(), Registerer: reg})
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	if token == "" {
		log.Warn("no API token configured: promotes and demotes are refused (403) until api.token or api.token_file is set")
	}
	if a.dash, err = controlplane.NewDashboard(controlplane.DashboardConfig{}); err != nil {
		a.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	a.handler = a.wrap(a.dash)
	return a, nil
}

// withMetrics serves the API and the dashboard beside mux's /metrics and
// probes, on one listener.
func (a *operatorAPI) withMetrics(mux *http.ServeMux) http.Handler {
	mux.Handle("/", a.dash)
	return a.wrap(mux)
}

// wrap returns a handler that gives every path under /api to the API
// server as it came, and the others to rest (the dashboard, /metrics). A
// ServeMux in front of the server would clean "/api/hotkeys/x/../y" and
// redirect it, method, body and token kept, to the key y; the server
// refuses such a path instead.
func (a *operatorAPI) wrap(rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The escaped path: a key's "%2F" and "%2E" stay part of its one
		// segment ("../.." is a key, not two steps up).
		if p := path.Clean("/" + r.URL.EscapedPath()); p == "/api" || strings.HasPrefix(p, "/api/") {
			a.server.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// Close stops the follower and the producer (what a change has in flight
// is given up on) and unregisters the API's metrics.
func (a *operatorAPI) Close() {
	if a.server != nil {
		a.server.Close()
	}
	if a.feed != nil {
		a.feed.Close()
		if a.feedDone != nil {
			<-a.feedDone
		}
	}
	if a.history != nil {
		a.history.Close()
	}
	if a.clients != nil {
		a.clients.Close()
	}
	if a.chPool != nil {
		_ = a.chPool.Close()
	}
	if a.producer != nil {
		a.producer.Close()
	}
	if a.follower != nil {
		a.follower.Close()
	}
}
