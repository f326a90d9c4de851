// Package api is the HTTP edge of paysvc (Echo): authentication, request
// validation, Idempotency-Key handling, rate limiting and the mapping of domain
// outcomes to HTTP. It holds no business rules and writes no money state: every
// write becomes a command on paysvc.commands.v1 and the handler answers with the
// engine's reply, which is sent only after the engine's batch committed. Reads come
// from the Postgres snapshots, always scoped by the authenticated merchant.
//
// Wire compatibility (../shared/COMPAT.md) is a property of the whole package:
// both trailing-slash forms of every path and no redirects, Connection: close on
// GET/HEAD/DELETE, success only as 200/201 with JSON, and every error a non-empty
// JSON body carrying detail, errors[] and request_id.
package api
