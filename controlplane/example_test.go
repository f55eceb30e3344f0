package controlplane_test

import (
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
)

// A process serves the API beside /metrics, over the follower it already
// has and a producer that can write the registry topic.
func Example() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	seeds := kgo.SeedBrokers("127.0.0.1:9092")
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{seeds}, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("follower", "err", err)
		return
	}
	defer f.Close()
	producer, err := kgo.NewClient(seeds, kgo.ProducerLinger(0))
	if err != nil {
		log.Error("producer", "err", err)
		return
	}
	defer producer.Close()
	// api.token / api.token_file, as the command's config maps them.
	tok, err := controlplane.LoadToken(os.Getenv("KEYHEAT_API_TOKEN"), "")
	if err != nil {
		log.Error("token", "err", err)
		return
	}
	api, err := controlplane.New(controlplane.Config{Follower: f, Producer: producer, Token: tok, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("api", "err", err)
		return
	}
	defer api.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/api/", api)
	_ = &http.Server{Addr: ":9400", Handler: mux}
}
