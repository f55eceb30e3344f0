package controlplane_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
)

// BenchmarkListHotkeys: one GET /api/hotkeys page, answer encoded, over a
// registry of 100k entries (app "shop"), through the Server's handler.
// sort_all is what each page would cost if it sorted the set: collecting
// the entries and sorting them, before any filtering or encoding.
func BenchmarkListHotkeys(b *testing.B) {
	const n = 100_000
	r := newRegistry(b, 4)
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		recs = append(recs, bulkHot("shop", "product:"+strconv.Itoa(i), float64(i)))
		if len(recs) == cap(recs) {
			r.produce(recs...)
			recs = recs[:0]
		}
	}
	f := r.follower()
	if got := f.Stats().Entries; got != n {
		b.Fatalf("%d entries, want %d", got, n)
	}
	s, err := controlplane.New(controlplane.Config{Follower: f, Producer: r.cl, Topic: r.topic})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	middle := firstPage(b, s, url.Values{"limit": {"1000"}})
	for range 49 {
		middle = firstPage(b, s, url.Values{"limit": {"1000"}, "cursor": {middle}})
	}
	for _, bc := range []struct {
		name string
		q    url.Values
	}{
		{"first_page_100", url.Values{}},
		{"middle_page_100", url.Values{"cursor": {middle}}},
		{"first_page_1000", url.Values{"limit": {"1000"}}},
		{"app_filter_no_match", url.Values{"app": {"blog"}}},
		{"source_filter_manual", url.Values{"source": {"manual"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := "/api/hotkeys?" + bc.q.Encode()
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
	b.Run("sort_all", func(b *testing.B) {
		b.ReportAllocs()
		all := make([]hotkeys.Entry, 0, n)
		byKey := make([]*hotkeys.Entry, 0, n)
		for b.Loop() {
			all = slices.AppendSeq(all[:0], f.All())
			// Sorting pointers: the cheapest sort of the set, swapping 8
			// bytes rather than an Entry.
			byKey = byKey[:0]
			for i := range all {
				byKey = append(byKey, &all[i])
			}
			slices.SortFunc(byKey, func(x, y *hotkeys.Entry) int {
				if c := strings.Compare(x.App, y.App); c != 0 {
					return c
				}
				return strings.Compare(x.Key, y.Key)
			})
		}
	})
}

// firstPage reads a page and returns its next cursor.
func firstPage(b *testing.B, s http.Handler, q url.Values) string {
	b.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/api/hotkeys?"+q.Encode(), nil))
	if rec.Code != http.StatusOK {
		b.Fatalf("%d %s", rec.Code, rec.Body)
	}
	return decode[controlplane.HotKeyPage](b, rec.Body.Bytes()).NextCursor
}
