// Package controlplane is keyheat's operator API: an HTTP API to see the
// hot-key registry as a process follows it and to overrule the detector,
// with Kafka as the only coordination between the processes serving it.
//
// It owns the API's routes, their JSON, their authentication and their
// metrics. Its state is what it reads from Kafka: a list reads the
// process's hotkeys.Follower (never a second reader of the registry), a
// report or alert the History a Feed fills from the reports topic and the
// registry, and a change is a manual entry (schemas.ManualEntry) published
// to the registry topic, which every follower, this process's included,
// then applies. Two servers therefore agree once they have read the same
// records, and a server can be restarted or run on every detect instance
// at will. Dashboard is the operator's live page over those routes,
// served from embedded files. The package does not listen (the caller
// mounts Server at /api/ and Dashboard at /, beside /metrics), read
// configuration files or create topics.
//
// # Routes
//
//	GET    /api/hotkeys                   the registry, paginated (HotKeyPage)
//	POST   /api/hotkeys/{key}/promote     promote key (PromoteRequest) → 201 Published
//	POST   /api/hotkeys/promote?key_b64=  the same, the key in base64
//	DELETE /api/hotkeys/{key}?app=&ttl=   demote key → 200 Published
//	DELETE /api/hotkeys?key_b64=&app=&ttl=  the same, the key in base64
//	GET    /api/reports/latest?scope=&app=  the latest window report of a scope
//	GET    /api/reports?scope=&app=&from=&to=&limit=  a scope's reports (ReportPage)
//	GET    /api/alerts?app=&limit=        hot-key events, newest first (AlertPage)
//	GET    /api/hotkeys/{key}/stats?app=&from=&to=&limit=  a key's windows (KeyStats)
//	GET    /api/hotkeys/stats?key_b64=&…  the same, the key in base64
//
// Every answer is JSON; every error is {"error": "..."} with a 4xx or 5xx
// status: 400 for a request the route cannot take (unknown query
// parameters, a query string that does not parse and unknown body fields
// included, so that a misspelling is not ignored; a path that is not
// canonical, with an empty, . or .. segment, which is never redirected), 401/403 (see Authentication), 404 for a path no route
// knows, 405 with Allow for a method the path does not take, 413 for a
// body over MaxBodyBytes, 503 when the follower has not read the registry
// yet (a list; with Retry-After) or Kafka did not acknowledge a change.
//
// GET /api/hotkeys lists what the follower's set holds: key (and key_b64,
// its bytes in base64, when the key is not UTF-8), key_hash, app, source
// (detector or manual), mitigation and split_factor, rate and peak_rate,
// onset and detected, and for an entry with a TTL (a promote's) ttl,
// expires and expires_in. Manual demotes in force hide their key, so they
// are not listed. Filters: app=<app> and source=detector|manual.
//
// A promote publishes a manual entry that makes the key hot, with the
// request's mitigation, until its TTL ends, whatever the detector says
// meanwhile; a demote (DELETE) one that keeps the key out of the set until
// its ttl ends, whatever the detector says. After the TTL the detector's
// state rules again. Both need a ttl (a Go duration from MinTTL to
// Config.MaxTTL) and an app, and take by and reason, for people. A change
// is answered once Kafka acknowledged its record, with the entry and where
// it was written; followers (this server's too) show it once they read it,
// usually within milliseconds. A 503 means Kafka did not acknowledge it
// within the request's context and Config.PublishTimeout: the record may
// still be written. Retrying is safe: followers apply, of a key's manual
// entries, the one made last (created_ms, stamped by the server from its
// clock, to the millisecond), whatever order they are written in, so the
// first attempt landing after its retry, or after a later change made
// through another server, changes nothing (two changes stamped in the
// same millisecond are concurrent: the one read last rules). The servers'
// clocks must
// therefore agree (to well under the time between two changes of a key),
// and so must the applications' with theirs, which end a TTL by their own
// clock.
//
// # Reports, alerts and key stats
//
// These routes read a History (Config.History; without one they answer
// 404), which a Feed fills with every window report and detector event
// detect publishes, read back from Kafka (from FeedConfig.Backlog records
// before each partition's end at start, then as they come): every
// instance answers alike, whichever one merges. History keeps, in
// memory, the latest windows of each scope (the cluster, each app) and
// the latest events, within HistoryConfig's bounds. With
// Config.ReportSource (controlplane/chsource: the ClickHouse tables the
// sink writes) the routes also answer for windows and events older than
// memory holds; should the source fail, they answer what memory holds,
// with source_error saying why.
//
// Memory is complete from a time on: it holds every window of a scope
// from its oldest on, and every event detected after its oldest, unless
// the Feed's start missed some. A report's partition is set by its ID, so
// a scope's windows are spread over the partitions, and a backlog cut
// short on a busy partition misses windows after the scope's oldest one:
// memory then counts as complete only from the latest first window read
// of a partition cut so. The registry is compacted, so of the events
// before the Feed started only a key's latest is there: memory counts as
// complete for events detected after the Feed started. Until the Feed has
// read what the topics held at its start, memory counts as complete from
// no time. The routes answer from memory what lies in its complete part
// and ask the source for what lies before it (merged with what memory
// holds there, memory's version first).
//
// GET /api/reports/latest is the scope's latest report as detect
// publishes it on keyheat.reports (schemas.WindowReport's JSON), or 404
// when none came yet. scope is cluster (the default) or app, which needs
// app; app alone means scope app.
//
// GET /api/reports returns {"reports": [...]} in time order: the windows
// starting in [from, to) (RFC 3339 or Unix milliseconds; the default is
// every window; a fraction of a millisecond rounds up, and a range
// holding no whole millisecond is empty), at most limit (default
// DefaultReportsLimit, at most MaxReportsLimit), the latest ones when
// more match, and then "more": true: ask again with to set to the first
// report's start_ms to page back (when memory's windows fill the page,
// the source is asked for one window to know). history_from_ms is where
// memory's complete part starts; earlier windows came from ClickHouse
// unless memory held them, and ClickHouse does not store some of a
// report's fields (floor, a key's bytes_error, a node's ranges, an
// advice's threshold: see chsource), so they read 0 or absent there.
//
// GET /api/alerts returns {"alerts": [...]}: hot-key events (hot, update,
// cooled; schemas.HotKeyEvent's JSON), newest first by detected_ms (then
// id), from memory and, when memory's complete part does not fill the
// limit, older ones from ClickHouse. app= keeps one app's; limit defaults
// to DefaultAlertsLimit. The dashboard polls it every second, so the
// source's answer for events older than memory's complete part is reused
// for 5 seconds (a minute once that part starts more than a minute ago):
// an event the sink writes late shows up that much later.
//
// GET /api/hotkeys/{key}/stats (the key as the mutations take it, or
// key_b64 on /api/hotkeys/stats) answers KeyStats: per window whose app
// report lists the key (any of its top lists: events, bytes, reads,
// writes, latency), its count and rate (events per second of the
// window), share, bytes, reads, writes, summed latency, partition and
// ranks, newest first, from memory then ClickHouse (source says which);
// the partition its events were seen in, where a window or alert names
// one; its events (alerted, episodes: the hot ones, alerts: at most 100,
// newest first); its registry entries while hot, as GET /api/hotkeys
// lists them (null while the registry is still being read); and
// clients: with app and Config.Clients, the applications' own figures
// for the key (ClientKeyStats: local hits and hit ratio, loads and
// coalesced Gets, split shards, writes and reads), summed over the live
// clients whose hotkeys.StatsPublisher lists it; null otherwise. Without
// app the key is looked up in every app, and memory's complete part
// starts at the latest of the apps'. Without from the range starts
// DefaultKeyStatsSpan (a day) before to, or before the newest window
// memory holds, or before now, which bounds what ClickHouse scans; give
// from to reach further back. A window where the key made none of its
// app's lists has no entry: it then had at most the lists' last counts.
//
// # Keys
//
// A key is any bytes, up to Config.MaxKeyBytes. In a path it is one
// segment, percent-escaped (url.PathEscape): "%2F" is a '/' of the key,
// never a separator, "%25" a '%', "%FF" the byte 0xFF. Keys "." and ".."
// must be sent as "%2E" and "%2E%2E" (HTTP clients and the server's mux
// resolve the bare ones as path steps). Where a proxy decodes "%2F" or a
// client cannot send raw bytes, the routes without {key} take key_b64:
// the key's bytes in base64, standard or URL-safe, padded or not.
//
// # Authentication
//
// Changes need the header "Authorization: Bearer <token>" with
// Config.Token (LoadToken reads it from api.token or api.token_file).
// With no token configured every change is refused with 403 and a message
// naming those settings; a missing or wrong token is 401 with
// WWW-Authenticate: Bearer. Reads are open unless Config.ProtectReads
// puts them behind the token too. The token is compared in constant time
// and appears in no log and no error. Browsers never send a bearer token
// by themselves, so a page elsewhere cannot make a logged-in browser
// change the registry.
//
// # Pagination
//
// The list is in (app, key) order, keys compared as bytes. A page holds
// up to limit entries (default DefaultLimit, at most MaxLimit); when more
// follow, next_cursor is set, and cursor=<next_cursor> asks for the page
// after it. A cursor is opaque; it holds the last (app, key) returned, not
// an offset, so it stays valid while the registry changes and does not
// expire: over a whole walk every entry present from its first page to
// its last is listed exactly once, an entry added or removed meanwhile is
// listed at most once, and the filters may differ between pages. total
// is the number of entries matching the filters when the page was read.
// A page costs a walk over the follower's set, without sorting it (see
// list.go).
//
// # Metrics
//
// keyheat_api_requests_total{route,method,code} and
// keyheat_api_request_duration_seconds{route}, route being the route's
// pattern ("/api/hotkeys/{key}/promote"), never the path: a key is never a
// label value.
package controlplane
