// Package composefile reads the parts of a Docker Compose file that
// keyheat's deployment tests check: each service's image or build,
// command, environment, published ports, mounts, dependencies and
// healthcheck, with ${VAR} interpolation as Compose does it.
//
// It is not a Compose implementation. It reads the short and long forms of
// ports, volumes and depends_on, YAML anchors and merge keys, and the
// ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message} and $$ forms of
// interpolation; a form it does not read (a port range, an unbraced $VAR)
// is an error naming the service, never silently skipped. Extends,
// profiles, include and env_file are not read.
package composefile
