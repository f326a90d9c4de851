// Package mount is how an aggregate declares its HTTP routes without the engine
// knowing HTTP and without its package importing the API's machinery
// (docs/adr/0007-one-aggregate-contract.md, "How to add an aggregate").
//
// A kind lists its routes in a func(Mount), next to its engine.Kind, in the
// service's one list (cmd/paysvc/service's Aggregates). The API implements Mount
// (api/kindroutes.go): every route it mounts is registered like a built-in one,
// through the route table's declared access, so it authenticates the secret key,
// is rate limited, checks its permission, honours Idempotency-Key, waits for the
// command's reply and maps it to HTTP, and is in Echo's route table, the OpenAPI
// description and the drift tests like any other route.
//
// This package holds declarations only (types, no machinery): the aggregates'
// kind packages may import it, and nothing else of the API (cmd/paysvc/layers_test.go).
package mount
