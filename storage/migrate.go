package storage

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// functionFiles are the SQL functions the service runs, one file a function, each
// a CREATE OR REPLACE FUNCTION: the only place a function's definition is written
// (docs/adr/0008-repeatable-functions.md).
//
//go:embed functions/*.sql
var functionFiles embed.FS

// migrationLock is an arbitrary advisory-lock key shared by every paysvc process.
const migrationLock = 7_316_420_001

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %q: name must be NNNN_name.up.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %q: %w", name, err)
		}
		b, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

type functionFile struct {
	name     string // the file's name, e.g. paysvc_commit_batches_v3.sql
	sql      string
	checksum string // hex SHA-256 of the file's bytes
}

// functions returns the function files in name order.
func functions() ([]functionFile, error) {
	entries, err := fs.ReadDir(functionFiles, "functions")
	if err != nil {
		return nil, err
	}
	out := make([]functionFile, 0, len(entries))
	for _, e := range entries {
		b, err := functionFiles.ReadFile("functions/" + e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, functionFile{name: e.Name(), sql: string(b), checksum: hex.EncodeToString(sum[:])})
	}
	return out, nil
}

// Migrated is what one migration run changed.
type Migrated struct {
	// Versions are the numbered migrations applied, in order.
	Versions []int
	// Functions are the function files (re)applied, by file name.
	Functions []string
	// SchemaAhead says the database holds a numbered migration newer than any this
	// binary embeds: its functions are a newer release's, and were left alone.
	SchemaAhead bool
}

// Migrate applies every embedded numbered migration not yet applied, then the
// function files (MigrateReport), all in one transaction. It returns the versions
// it applied.
func Migrate(ctx context.Context, db *sqlx.DB) ([]int, error) {
	m, err := MigrateReport(ctx, db)
	return m.Versions, err
}

// MigrateReport is Migrate, saying also which function files it applied.
//
// Everything happens in one transaction under an advisory lock, so several
// processes starting at once migrate once, and a failure anywhere leaves the
// database as it was. The numbered migrations come first (they make the tables
// the functions write), then each function file whose checksum differs from the
// one recorded in schema_functions. After any numbered migration every file is
// applied again, so that whatever a migration did to a function, what runs is
// what the files say. A binary older than the schema applies no file: during a
// rolling deploy, an instance of the previous release that restarts must not put
// its functions back over the new release's.
func MigrateReport(ctx context.Context, db *sqlx.DB) (Migrated, error) {
	return MigrateProgress(ctx, db, nil)
}

// MigrateProgress is MigrateReport, telling progress (when not nil) each
// migration and function file as it applies it, one line a call ("applying
// NAME ..." then "done in 12ms"): a long migration shows which one is running.
func MigrateProgress(ctx context.Context, db *sqlx.DB, progress func(string)) (Migrated, error) {
	if progress == nil {
		progress = func(string) {}
	}
	var out Migrated
	ms, err := migrations()
	if err != nil {
		return out, err
	}
	fns, err := functions()
	if err != nil {
		return out, err
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return out, fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return out, fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE IF NOT EXISTS schema_functions (
		file text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return out, fmt.Errorf("migrate: bookkeeping tables: %w", err)
	}
	if out.Versions, err = applyNumbered(ctx, tx, ms, progress); err != nil {
		return out, err
	}
	if out.Functions, out.SchemaAhead, err = applyFunctions(ctx, tx, fns, ms[len(ms)-1].version, len(out.Versions) > 0, progress); err != nil {
		return out, err
	}
	if err := tx.Commit(); err != nil {
		return out, fmt.Errorf("migrate: commit: %w", err)
	}
	return out, nil
}

// applyNumbered applies the numbered migrations schema_migrations does not list.
func applyNumbered(ctx context.Context, tx *sqlx.Tx, ms []migration, progress func(string)) ([]int, error) {
	var done []int
	if err := tx.SelectContext(ctx, &done, `SELECT version FROM schema_migrations`); err != nil {
		return nil, fmt.Errorf("migrate: read applied: %w", err)
	}
	have := map[int]bool{}
	for _, v := range done {
		have[v] = true
	}
	var applied []int
	for _, m := range ms {
		if have[m.version] {
			continue
		}
		start := time.Now()
		progress("applying " + strings.TrimSuffix(m.name, ".up.sql") + " ...")
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("migrate: %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return nil, fmt.Errorf("migrate: record %s: %w", m.name, err)
		}
		progress("done in " + time.Since(start).Round(time.Millisecond).String())
		applied = append(applied, m.version)
	}
	return applied, nil
}

// applyFunctions applies the function files whose checksum schema_functions does
// not hold (all of them when all is set), unless the schema is newer than head,
// this binary's newest numbered migration. It returns the files applied, and
// whether the schema was newer.
func applyFunctions(ctx context.Context, tx *sqlx.Tx, fns []functionFile, head int, all bool, progress func(string)) ([]string, bool, error) {
	var schemaHead int
	if err := tx.GetContext(ctx, &schemaHead, `SELECT coalesce(max(version), 0) FROM schema_migrations`); err != nil {
		return nil, false, fmt.Errorf("migrate: read schema version: %w", err)
	}
	if schemaHead > head {
		return nil, true, nil
	}
	var rows []struct{ File, Checksum string }
	if err := tx.SelectContext(ctx, &rows, `SELECT file, checksum FROM schema_functions`); err != nil {
		return nil, false, fmt.Errorf("migrate: read applied functions: %w", err)
	}
	recorded := make(map[string]string, len(rows))
	for _, r := range rows {
		recorded[r.File] = r.Checksum
	}
	var applied []string
	names := make(pq.StringArray, 0, len(fns))
	for _, f := range fns {
		names = append(names, f.name)
		if !all && recorded[f.name] == f.checksum {
			continue
		}
		start := time.Now()
		progress("applying functions/" + f.name + " ...")
		if _, err := tx.ExecContext(ctx, f.sql); err != nil {
			return nil, false, fmt.Errorf("migrate: functions/%s: %w", f.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_functions (file, checksum) VALUES ($1, $2)
			ON CONFLICT (file) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`, f.name, f.checksum); err != nil {
			return nil, false, fmt.Errorf("migrate: record functions/%s: %w", f.name, err)
		}
		progress("done in " + time.Since(start).Round(time.Millisecond).String())
		applied = append(applied, f.name)
	}
	// A file taken out of the tree leaves its function to the numbered migration
	// that drops it (an older engine may still call it); the bookkeeping forgets it,
	// so schema_functions lists exactly the files of the binary that migrated last.
	if _, err := tx.ExecContext(ctx, `DELETE FROM schema_functions WHERE NOT (file = ANY($1))`, names); err != nil {
		return nil, false, fmt.Errorf("migrate: forget removed function files: %w", err)
	}
	return applied, false, nil
}
