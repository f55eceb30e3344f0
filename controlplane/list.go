package controlplane

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/keyheat/keyheat/hotkeys"
)

// Page sizes of GET /api/hotkeys.
const (
	// DefaultLimit is a page's size when the request gives no limit.
	DefaultLimit = 100
	// MaxLimit is the largest limit a request may give.
	MaxLimit = 1000
)

// How a page is chosen.
//
// The follower's set has no order (All walks its hash shards), and the
// API lists it in (app, key) order so that a cursor, the last (app, key)
// a page returned, says where the next page starts whatever changed in
// between. Sorting the set for each page would cost O(n log n) per page:
// about 30 ms at 100k entries, before encoding anything
// (BenchmarkListHotkeys/sort_all). A page instead walks the set once and
// keeps, in a max-heap of limit+1 entries, the smallest entries after the
// cursor: O(n log limit), and since a walk meets the entries in no
// particular order, few of them ever enter the heap. A page of 100 costs
// about 2.5 ms at 100k entries, encoding included, 1.5 ms of which is the
// walk itself. The extra entry says whether another page follows.
//
// Why a walk under concurrent changes sees each entry present throughout
// exactly once: every page reads the live set, so such an entry e is in
// each page's walk. Pages cover consecutive ranges (cursor, last] of the
// (app, key) order, disjoint by construction, so e is returned at most
// once; and the page whose range holds e returns it, since e is among the
// limit smallest entries after that page's cursor (the page's last entry
// is the limit-th, and e comes no later). The last page returns everything
// after its cursor. An entry added or removed during the walk shows or
// not, depending on where the walk is; one refreshed shows once, as some
// page read it.

// listParams are the query parameters GET /api/hotkeys takes.
var listParams = []string{"app", "source", "limit", "cursor"}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q, err := singleParams(r, listParams...)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var f filter
	f.app = q["app"]
	if src := q["source"]; src != "" {
		if err := f.source.UnmarshalText([]byte(src)); err != nil {
			writeError(w, http.StatusBadRequest, "source: want detector or manual")
			return
		}
	}
	limit := DefaultLimit
	if l, ok := q["limit"]; ok {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a number from 1 to %d", l, MaxLimit))
			return
		}
		limit = n
	}
	var after *position
	if c := q["cursor"]; c != "" {
		p, err := decodeCursor(c)
		if err != nil {
			writeError(w, http.StatusBadRequest, "cursor: not one this API returned as next_cursor")
			return
		}
		after = &p
	}
	if !s.cfg.Follower.Ready() {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the registry is still being read; retry in a moment")
		return
	}
	entries, total := selectPage(s.cfg.Follower.All(), f, after, limit+1)
	page := HotKeyPage{HotKeys: make([]HotKey, 0, min(len(entries), limit)), Total: total}
	if len(entries) > limit {
		entries = entries[:limit]
		last := &entries[limit-1]
		page.NextCursor = encodeCursor(last.App, last.Key)
	}
	now := s.now()
	for i := range entries {
		page.HotKeys = append(page.HotKeys, hotKeyOf(&entries[i], now))
	}
	writeJSON(w, http.StatusOK, page)
}

// filter is what GET /api/hotkeys narrows the list to; zero fields match
// everything.
type filter struct {
	app    string
	source hotkeys.Source
}

func (f *filter) match(e *hotkeys.Entry) bool {
	return (f.app == "" || e.App == f.app) && (f.source == 0 || e.Source == f.source)
}

// position is a place in the (app, key) order.
type position struct{ app, key string }

// comparePos orders entries by app, then key, both as bytes.
func comparePos(app, key string, p position) int {
	if c := strings.Compare(app, p.app); c != 0 {
		return c
	}
	return strings.Compare(key, p.key)
}

func compareEntries(a, b *hotkeys.Entry) int {
	return comparePos(a.App, a.Key, position{b.App, b.Key})
}

// selectPage returns, in order, the n smallest entries of all that match f
// and come after after (nil: from the start), and how many entries match
// f in all.
func selectPage(all iter.Seq[hotkeys.Entry], f filter, after *position, n int) (page []hotkeys.Entry, total int) {
	h := make(entryHeap, 0, n)
	for e := range all {
		if !f.match(&e) {
			continue
		}
		total++
		if after != nil && comparePos(e.App, e.Key, *after) <= 0 {
			continue
		}
		h.offer(&e, n)
	}
	slices.SortFunc(h, func(a, b hotkeys.Entry) int { return compareEntries(&a, &b) })
	return h, total
}

// entryHeap is a max-heap by (app, key): its root is the largest entry
// kept, the one a smaller newcomer replaces.
type entryHeap []hotkeys.Entry

// offer keeps e if the heap holds fewer than n entries or e is smaller
// than its largest.
func (h *entryHeap) offer(e *hotkeys.Entry, n int) {
	if len(*h) < n {
		*h = append(*h, *e)
		h.up(len(*h) - 1)
		return
	}
	if n == 0 || compareEntries(e, &(*h)[0]) >= 0 {
		return
	}
	(*h)[0] = *e
	h.down(0)
}

func (h entryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if compareEntries(&h[i], &h[p]) <= 0 {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (h entryHeap) down(i int) {
	for {
		big, l := i, 2*i+1
		if l < len(h) && compareEntries(&h[l], &h[big]) > 0 {
			big = l
		}
		if r := l + 1; r < len(h) && compareEntries(&h[r], &h[big]) > 0 {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// cursorVersion starts every cursor, so that a later format can tell
// its own from this one's.
const cursorVersion = 1

// encodeCursor writes the position after (app, key): a version byte, the
// app's length as a uvarint, the app and the key, in unpadded URL-safe
// base64 (nothing in it needs escaping in a query).
func encodeCursor(app, key string) string {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(app)+len(key))
	b = append(b, cursorVersion)
	b = binary.AppendUvarint(b, uint64(len(app)))
	b = append(b, app...)
	b = append(b, key...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads what encodeCursor writes.
func decodeCursor(c string) (position, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return position{}, err
	}
	if len(b) == 0 || b[0] != cursorVersion {
		return position{}, errors.New("cursor: unknown version")
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || n > uint64(len(b)-1-w) {
		return position{}, errors.New("cursor: bad app length")
	}
	rest := b[1+w:]
	return position{app: string(rest[:n]), key: string(rest[n:])}, nil
}

// singleParams checks that r's query names only the given parameters, each at most
// once, and returns their values. A misspelled parameter is an error
// rather than a filter silently not applied.
func singleParams(r *http.Request, allowed ...string) (map[string]string, error) {
	// Not r.URL.Query(), which drops the pairs it cannot parse: a
	// misspelt or half-escaped parameter is refused, not ignored.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("the query string is not well formed (escape %%, ; and & in values): %v", err)
	}
	out := make(map[string]string, len(q))
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("unknown query parameter %q; this route takes %s", name, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, fmt.Errorf("query parameter %q is given %d times; give it once", name, len(vs))
		}
		out[name] = vs[0]
	}
	return out, nil
}
