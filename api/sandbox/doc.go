// Package sandbox is the sandbox server's developer tools: a Server-Sent Events
// stream of the merchant's events with the exact bodies its webhooks get
// (GET /api/v1/events/listen, behind `paysvc listen`), sample events that take the
// real path through the outbox (POST /api/v1/events/trigger, `paysvc trigger`),
// the embedded SMTP sink's mail (GET /api/v1/sandbox/mail) and subscription test
// clocks (/api/v1/subscriptions/test_clocks), which bill a subscription by a
// clock the merchant moves instead of the wall clock.
//
// It exists apart from the JSON API because none of it is part of a live
// payments service: each handler refuses on a live server (404), and none moves
// money. The server that mounts it (package api) declares every route and who may
// call it in its own route table, so the tools are authenticated, rate limited
// and documented like every other route; the tools read the principal and the
// request body through api/edge. The sandbox deposit, which credits test money
// through the engine, is a wallet command and stays with the JSON API.
package sandbox
