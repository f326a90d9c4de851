package storage

import (
	"context"
	"database/sql"
	"sync"

	"github.com/jmoiron/sqlx"
)

// The statements the engine and the relay run on every poll (the batch commit, the
// outbox fetch and delete) are prepared once per connection
// instead of sent as unnamed statements. lib/pq sends an unnamed statement with
// arguments in two round trips (parse and describe, then bind and execute), and
// PostgreSQL parses, analyses and plans it on every call: for the commit call with
// its 47 untyped parameters that is resolving the function's signature each time.
// A prepared statement is one round trip (bind, execute) and none of that work.
// database/sql prepares a *sql.Stmt on each pooled connection the first time it
// runs there, and again after a connection is replaced, so a restarted server or
// a dropped connection costs one extra round trip, never an error.
//
// Only statements whose plan cannot go wrong are prepared: a prepared statement
// gets a generic plan after five runs, made for the table's size at that moment.
// The commit is a function call (its statements are planned inside it, as
// before); the relay's fetch and delete run with enable_seqscan off. The dedupe
// read ("command_id = ANY($1)") is not prepared: its generic plan made on a small
// table is a sequential scan.
//
// Measured in docs/benchmarks-history.md.

type stmtKey struct {
	db    *sql.DB
	query string
}

// stmtCache holds one *sqlx.Stmt per pool and query text. Entries live as long as
// the process: a service opens one pool; tests open a few per package.
var stmtCache sync.Map // stmtKey -> *sqlx.Stmt

// prepared returns the pool's prepared statement for query, preparing it on first
// use.
func prepared(ctx context.Context, db *sqlx.DB, query string) (*sqlx.Stmt, error) {
	k := stmtKey{db: db.DB, query: query}
	if s, ok := stmtCache.Load(k); ok {
		return s.(*sqlx.Stmt), nil
	}
	s, err := db.PreparexContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := stmtCache.LoadOrStore(k, s); loaded {
		s.Close()
		return prev.(*sqlx.Stmt), nil
	}
	return s, nil
}
