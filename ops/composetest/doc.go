// Package composetest checks docker-compose.yml without Docker: the machines
// that run the tests have no Docker engine and no compose plugin, so
// `docker compose config -q` cannot run there. Its test interpolates the file
// as compose does (required variables refuse to start without a value),
// parses it with merge keys, and checks what production needs of it: a
// healthcheck on every paysvc service, no default password, pinned image
// tags and one mail catcher. It has no code of its own.
package composetest
