package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is one HTTP listener of a command: /metrics and its probes, the
// operator API, or both.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve listens on addr (metrics.addr) and serves MetricsMux(reg, ready)
// until Close.
func Serve(addr string, reg *prometheus.Registry, ready func() error, log *slog.Logger) (*Server, error) {
	return Listen("metrics.addr", addr, MetricsMux(reg, ready), log)
}

// MetricsMux serves
//
//   - /metrics: reg in the Prometheus text format;
//   - /livez: 200 while the process runs (an orchestrator restarts it
//     when this stops answering);
//   - /readyz: 200 when ready returns nil, 503 with its error otherwise
//     (a sink retrying, the group not joined yet). A nil ready is always
//     ready.
//
// The caller may add routes (the operator API under "/").
func MetricsMux(reg *prometheus.Registry, ready func() error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Listen listens on addr and serves h until Close. Listening errors are
// returned at once, naming setting (the config key of addr), so a taken
// port fails the command before it reads anything.
func Listen(setting, addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	// Bodies are small (the API's are at most 64 KiB) and answers short:
	// a client that sends or reads slower than these is dropped.
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "setting", setting, "addr", addr, "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the server listens on (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, waiting up to two seconds for requests in
// flight. Calling it again does nothing.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}

// NewRegistry returns the registry a command's metrics go to, with the Go
// runtime's and the process's own (go_*, process_*: CPU, memory,
// goroutines, open files) already in it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
