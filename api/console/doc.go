// Package console is the merchant console: server-rendered HTML pages at
// /console/ for a merchant signed in with a secret key, behind a server-side
// session (session.go), with the API keys form's own guards (forms.go) and the
// pages' templates embedded from this directory (*.html).
//
// It exists apart from the JSON API so that the console can grow (teams, roles,
// approvals) without reaching into the API's handlers, and the API without
// carrying pages. It writes no money state and holds no rule of its own: each
// action is a request to the API's handler that the mounting server gives it
// (Deps.API), made in-process with the session's principal (edge.WithCaller), so
// the permission check, Idempotency-Key, command and reply are the API's. Pages
// read what they list from storage, scoped by the session's merchant, after
// checking the permission the matching API read needs. The only writes it makes
// itself are its sessions and the keys its keys page creates and revokes.
//
// The server that mounts it (package api) registers its routes through its own
// route table (Routes), so each console route declares its access like the
// API's, and runs Authenticate before every route but sign-in. Refusals before a
// session exists (a cross-site form) are edge.Error values, which that server
// answers in the JSON error shape; everything else answers HTML under a policy
// that lets no script run (consoleCSP).
package console
