// Package api is the HTTP edge of paysvc (Echo): authentication, request
// validation, Idempotency-Key handling, rate limiting and the mapping of domain
// outcomes to HTTP. It writes no money state: every write becomes a command on
// paysvc.commands.v1 and the handler answers with the engine's reply, which is sent
// only after the engine's batch committed. Reads come from the Postgres snapshots,
// always scoped by the authenticated merchant. It holds no business rule: prices
// are the aggregates' (invoice.Quote for a collection, which converts what the
// customer asked into KES at the configured rates and prices it; the payout kind
// for each payout transaction), applied by their kinds behind the command log; the
// collection calls send what the customer asked, amount and currency as given, and
// the fee quote and the refusal of an unpriceable payment read the same function a
// collection is converted and priced by. The API passes the fee schedule and the
// rate table from its configuration to those functions and has no rate, rounding
// or fee of its own.
//
// Besides the JSON API it serves:
//   - the customer's hosted pages, which are package api/pages (the checkout
//     page, a payment link's page and QR code, a plan's subscribe page, a
//     subscription's card setup page, and the page a refused browser request
//     there gets instead of the JSON error), with their stylesheet, script and
//     icon under /static/: this package mounts their routes in the route table,
//     each opened by the capability its path names (capability.go gives a page
//     its resource and the admitted merchant), and serves the JSON their script
//     calls;
//   - in the sandbox, the developer tools of package api/sandbox: a server-sent
//     event stream of the merchant's events (GET /api/v1/events/listen) that
//     `paysvc listen` forwards to a local URL, sample events, the embedded SMTP
//     sink's mail (GET /api/v1/sandbox/mail) and subscription test clocks, each
//     declared in the route table here;
//   - the providers' callbacks (Daraja STK and B2C), authenticated by the secret
//     token in their path.
//   - the merchant console at /console/, which is package api/console: this
//     package builds it with the API's own handler, key check and page assets,
//     and mounts its routes in the route table; every action it takes is a call
//     of one of the API's routes in-process with the session's principal.
//
// What the API, the console, the hosted pages and the sandbox tools share (the
// principal, the permission catalogue, the key format, the error shape, request
// ids, reading a JSON body, the pages' security headers) is package api/edge.
//
// Every route declares who may call it in routes() (server.go): docs/security.md's
// route table lists them, and a test keeps the two in step.
//
// Wire compatibility (docs/compat.md) is a property of the whole package:
// both trailing-slash forms of every path and no redirects, Connection: close on
// GET/HEAD/DELETE, success only as 200/201 with JSON, and every error a non-empty
// JSON body carrying detail, errors[] and request_id (to an API client: a browser
// on a customer's page reads its error as a page).
package api
