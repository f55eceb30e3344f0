// Command load drives the shop example with a Zipf-like mix of product
// reads and views plus one planted hot product, then prints requests per
// second and the mix of status codes.
//
//	go run ./examples/shop/load --products=10000 --hot=42 --hot-share=0.3 --duration=1m
//
// It stops after --duration, or at SIGINT/SIGTERM, and prints its summary
// either way.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	url        string
	products   int
	zipf       float64
	hot        string
	hotShare   float64
	hotStart   time.Duration
	hotFor     time.Duration
	views      float64
	rate       float64
	workers    int
	duration   time.Duration
	seed       uint64
	reportEach time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "http://127.0.0.1:8080", "the shop's base URL")
	flag.IntVar(&c.products, "products", 10000, "product ids 1..N, as the shop was seeded")
	flag.Float64Var(&c.zipf, "zipf", 0.8, "Zipf exponent of the background mix (0: uniform); rank r is product r")
	flag.StringVar(&c.hot, "hot", "", "planted hot product id; empty plants none")
	flag.Float64Var(&c.hotShare, "hot-share", 0.3, "share of requests that go to the hot product while it is planted")
	flag.DurationVar(&c.hotStart, "hot-start", 0, "when the hot product starts, from the start of the run")
	flag.DurationVar(&c.hotFor, "hot-for", 0, "how long the hot product stays hot (0: to the end)")
	flag.Float64Var(&c.views, "views", 0.1, "share of requests that POST a view instead of a GET")
	flag.Float64Var(&c.rate, "rate", 500, "requests per second (0: as fast as the workers go)")
	flag.IntVar(&c.workers, "workers", 16, "concurrent requests at most")
	flag.DurationVar(&c.duration, "duration", 30*time.Second, "how long to run (0: until interrupted)")
	flag.Uint64Var(&c.seed, "seed", 1, "random seed")
	flag.DurationVar(&c.reportEach, "report-every", 5*time.Second, "progress line interval (0: none)")
	flag.Parse()
	if c.products < 1 || c.workers < 1 || c.zipf < 0 || c.rate < 0 || c.hotShare < 0 || c.hotShare > 1 || c.views < 0 || c.views > 1 {
		fmt.Fprintln(os.Stderr, "load: --products and --workers must be positive, --zipf and --rate not negative, shares in [0, 1]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	s := run(ctx, c)
	s.print(os.Stdout, "done")
}

// stats are the counts of a run, safe for concurrent use.
type stats struct {
	start    time.Time
	mu       sync.Mutex
	codes    map[string]int64 // "200", "404", "error"
	requests atomic.Int64
	hotReads atomic.Int64 // GETs of the hot product's record
}

func (s *stats) add(code string, hot bool) {
	s.requests.Add(1)
	if hot {
		s.hotReads.Add(1)
	}
	s.mu.Lock()
	s.codes[code]++
	s.mu.Unlock()
}

func (s *stats) print(w io.Writer, what string) {
	s.mu.Lock()
	codes := make([]string, 0, len(s.codes))
	for c, n := range s.codes {
		codes = append(codes, c+"="+strconv.FormatInt(n, 10))
	}
	s.mu.Unlock()
	sort.Strings(codes)
	n, secs := s.requests.Load(), time.Since(s.start).Seconds()
	fmt.Fprintf(w, "%s: requests=%d seconds=%.1f rps=%.0f hot_reads=%d status: %s\n", what, n, secs, float64(n)/secs, s.hotReads.Load(), strings.Join(codes, " "))
}

// run sends requests until ctx ends and returns the counts.
func run(ctx context.Context, c config) *stats {
	s := &stats{start: time.Now(), codes: map[string]int64{}}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: c.workers}}
	pick := newZipf(c.products, c.zipf)
	type job struct {
		req *http.Request
		hot bool
	}
	jobs := make(chan job, c.workers)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for j := range jobs {
				s.add(send(cl, j.req), j.hot)
			}
		})
	}
	if c.reportEach > 0 {
		t := time.NewTicker(c.reportEach)
		defer t.Stop()
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					s.print(os.Stdout, "progress")
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(c.seed, 0))
	for i := 0; ctx.Err() == nil; i++ {
		if c.rate > 0 { // paced from the start, so a slow moment is caught up
			if d := time.Until(s.start.Add(time.Duration(float64(i) / c.rate * float64(time.Second)))); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		since := time.Since(s.start)
		id := strconv.Itoa(pick(rng))
		if c.hot != "" && since >= c.hotStart && (c.hotFor == 0 || since < c.hotStart+c.hotFor) && rng.Float64() < c.hotShare {
			id = c.hot
		}
		method, path := http.MethodGet, "/products/"+id
		if rng.Float64() < c.views {
			method, path = http.MethodPost, path+"/view"
		}
		hot := id == c.hot && method == http.MethodGet
		// The request's ctx is not the run's: a stop lets the requests in
		// flight finish and be counted.
		req, _ := http.NewRequestWithContext(context.Background(), method, c.url+path, nil)
		select {
		case jobs <- job{req, hot}:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	return s
}

// send does req and returns its status code, or "error".
func send(cl *http.Client, req *http.Request) string {
	resp, err := cl.Do(req)
	if err != nil {
		return "error"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// newZipf returns a picker of 1..n where rank r comes with probability
// proportional to 1/r^s (s = 0: uniform). Unlike math/rand's Zipf it
// takes any s ≥ 0, so a mild skew (s < 1) is possible.
func newZipf(n int, s float64) func(*rand.Rand) int {
	cdf := make([]float64, n)
	sum := 0.0
	for r := range n {
		sum += 1 / math.Pow(float64(r+1), s)
		cdf[r] = sum
	}
	return func(rng *rand.Rand) int {
		i, _ := slices.BinarySearch(cdf, rng.Float64()*sum)
		return min(i, n-1) + 1
	}
}
