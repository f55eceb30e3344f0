package schemas

// AccessEvent is one access to one key, as an application's access log
// recorded it: a cache GET, a database query, an HTTP request.
//
// The record key on keyheat.events is Key, so that every event of a key lands
// on the same partition and a partition's counts are the cluster's counts.
// Zero values mean "the log did not say": Bytes 0, Status 0, Node "".
type AccessEvent struct {
	// TimeMs is the event time in Unix milliseconds: when the access
	// happened according to the log line, not when keyheat saw it.
	TimeMs int64
	// Key is the accessed key (cache key, table:id, request path). Never
	// empty on a valid event.
	Key string
	// App groups keys of one application (JD hotkey's "app", hotkey-go's
	// "group"); rules, reports and the registry are per app.
	App string
	// Op is the operation: GET, SET, HGETALL, an HTTP method, …
	Op string
	// Bytes is the size of the value or response, when known.
	Bytes int64
	// Status is the result code (HTTP status, 0 when the log has none).
	Status int32
	// Client identifies the caller (IP, host or service name).
	Client string
	// Node is the shard, node or host that served the access, when known.
	Node string
	// LatencyUs is the service time in microseconds, when known.
	LatencyUs int64
}

// Reset clears e for reuse without releasing anything it points to.
func (e *AccessEvent) Reset() { *e = AccessEvent{} }
