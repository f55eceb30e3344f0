// Package keylog is keyheat's one policy for access keys in log lines.
//
// An access key is application data: a user id, an email address, a
// session token in a URL. Log lines go to log shippers and to people who
// may see no application data, so by default a line shows a key only by
// its key_hash, the hash the hot-key registry, ClickHouse and the
// dashboard also carry ([schemas.KeyHash]): enough to find the key there,
// or to match two lines about the same key. An operator who wants the
// keys themselves in the log turns them on (log.keys: raw in keyheat's
// config, KEYHEAT_LOG_KEYS=raw; the LogRawKeys option of the packages
// that log keys); the hash is then shown beside each key.
//
// Every log line of keyheat's that names an access key (detect, the
// operator API, the hotkeys client library) builds its attribute with
// [Attr] or [Named]. What a command writes to standard output for a
// person to read (detect --print, detect query) is not a log and shows
// keys as they are.
//
// keylog owns how a key shows in a log line; it does not decide where
// logs go or at which level.
package keylog
