package controlplane

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// apiMetrics are a Server's Prometheus metrics. Their labels are bounded:
// route is a registered pattern ("unmatched" for none), method one of a
// fixed list ("other" beyond it), code a status the server writes. A key
// never appears in a label.
type apiMetrics struct {
	reg      prometheus.Registerer
	all      []prometheus.Collector
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newAPIMetrics(reg prometheus.Registerer) (*apiMetrics, error) {
	m := &apiMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_api_requests_total",
			Help: "Control-plane API requests answered, by route pattern, method and status code."}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "keyheat_api_request_duration_seconds",
			Help: "Time to answer a control-plane API request, by route pattern; a mutation's includes Kafka's acknowledgement.",
			// From a list served from memory (about a millisecond) to a
			// mutation waiting out DefaultPublishTimeout.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"route"}),
	}
	if reg == nil {
		return m, nil
	}
	m.reg = reg
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("register api metrics: %w", err)
		}
		m.all = append(m.all, c)
	}
	return m, nil
}

func (m *apiMetrics) unregister() {
	for _, c := range m.all {
		m.reg.Unregister(c)
	}
	m.all = nil
}

func (m *apiMetrics) observe(route, method string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, sanitizeMethod(method), strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// sanitizeMethod maps a request's method to a bounded set: a client can
// send any token as a method.
func sanitizeMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}
