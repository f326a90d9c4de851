package storage

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// SchemaState is how a database's schema stands against this binary's
// migrations, read without changing anything.
type SchemaState struct {
	Head     int   // the newest numbered migration the database has applied (0: none)
	Embedded int   // the newest this binary embeds
	Pending  []int // embedded migrations the database has not applied
}

// Current: the database is exactly at this binary's schema.
func (s SchemaState) Current() bool { return len(s.Pending) == 0 && s.Head <= s.Embedded }

// Ahead: the database holds a migration newer than this binary knows (a newer
// release migrated it).
func (s SchemaState) Ahead() bool { return s.Head > s.Embedded }

// ReadSchemaState reads the applied migrations; an empty database (no
// schema_migrations yet) has every embedded migration pending.
func ReadSchemaState(ctx context.Context, db *sqlx.DB) (SchemaState, error) {
	ms, err := migrations()
	if err != nil {
		return SchemaState{}, err
	}
	st := SchemaState{Embedded: ms[len(ms)-1].version}
	var exists bool
	if err := db.GetContext(ctx, &exists, `SELECT to_regclass('schema_migrations') IS NOT NULL`); err != nil {
		return st, fmt.Errorf("schema state: %w", err)
	}
	var done []int
	if exists {
		if err := db.SelectContext(ctx, &done, `SELECT version FROM schema_migrations`); err != nil {
			return st, fmt.Errorf("schema state: %w", err)
		}
	}
	have := map[int]bool{}
	for _, v := range done {
		have[v] = true
		st.Head = max(st.Head, v)
	}
	for _, m := range ms {
		if !have[m.version] {
			st.Pending = append(st.Pending, m.version)
		}
	}
	return st, nil
}
