// Package composefile loads a Docker Compose file with compose-go, the
// loader Docker Compose itself uses (schema validation, interpolation,
// normalisation), and gives keyheat's deployment tests the parts they
// check: each service's image or build, command, environment, published
// ports, mounts, dependencies and healthcheck.
//
// No Docker engine is needed: tests read the file as `docker compose
// config` would and hold it to keyheat's own commands and config loader.
package composefile
