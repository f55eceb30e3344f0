package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
)

// operatorAPI is the control plane as a detect instance serves it: the
// registry followed as an application follows it, a producer for the
// operators' changes, and the routes over them.
type operatorAPI struct {
	follower *hotkeys.Follower
	producer *kgo.Client
	server   *controlplane.Server
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
	a.server, err = controlplane.New(controlplane.Config{Follower: a.follower, Producer: a.producer, Token: token,
		ProtectReads: cfg.API.ProtectReads, MaxTTL: cfg.API.MaxTTL, MaxKeyBytes: cfg.Events.Limits.MaxKeyBytes,
		Logger: log, Registerer: reg})
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("api: %w", err)
	}
	if token == "" {
		log.Warn("no API token configured: promotes and demotes are refused (403) until api.token or api.token_file is set")
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", a.server)
	mux.Handle("/api", a.server)
	a.handler = mux
	return a, nil
}

// mount adds the API's routes to mux (one listener with /metrics).
func (a *operatorAPI) mount(mux *http.ServeMux) {
	mux.Handle("/api/", a.server)
	mux.Handle("/api", a.server)
}

// Close stops the follower and the producer (what a change has in flight
// is given up on) and unregisters the API's metrics.
func (a *operatorAPI) Close() {
	if a.server != nil {
		a.server.Close()
	}
	if a.producer != nil {
		a.producer.Close()
	}
	if a.follower != nil {
		a.follower.Close()
	}
}
