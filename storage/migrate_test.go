package storage_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/ids"
	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// migrationCount is the number of embedded migrations, read from the source tree.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(os.DirFS("migrations"), "*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	return len(files)
}

// emptySchema returns a connection whose search_path is a new, empty schema.
func emptySchema(t *testing.T) *sqlx.DB {
	t.Helper()
	ctx := context.Background()
	base := storagetest.URL(t)
	admin, err := storage.Open(ctx, base, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	name := "t_mig_" + strings.ToLower(ids.Alias(10))
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	db, err := storage.Open(ctx, u.String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		_, _ = admin.ExecContext(context.Background(), fmt.Sprintf(`DROP SCHEMA %s CASCADE`, name))
		admin.Close()
	})
	return db
}

// applyNumbered brings an empty schema to where the numbered migrations before
// version `below` take it, as a binary of that release would have: each file run
// as it is and recorded in schema_migrations, and no function file applied.
func applyNumbered(t *testing.T, db *sqlx.DB, below int) {
	t.Helper()
	ctx := context.Background()
	files, err := fs.Glob(os.DirFS("migrations"), "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(f, "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		if v >= below {
			continue
		}
		sql, err := os.ReadFile("migrations/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, v, f); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("FreshSchema_AppliesAllThenNothing", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		db := emptySchema(t)
		applied, err := storage.Migrate(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != migrationCount(t) || applied[0] != 1 {
			t.Fatalf("first run applied %v, want all %d migrations from 1", applied, migrationCount(t))
		}
		for i := 1; i < len(applied); i++ {
			if applied[i] <= applied[i-1] {
				t.Fatalf("migrations applied out of order: %v", applied)
			}
		}
		again, err := storage.Migrate(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != 0 {
			t.Fatalf("second run applied %v, want nothing", again)
		}
		if n := count(t, db, "schema_migrations"); n != len(applied) {
			t.Fatalf("schema_migrations has %d rows, want %d", n, len(applied))
		}
		// The schema is usable.
		if n := count(t, db, "wallets"); n != 0 {
			t.Fatalf("wallets has %d rows", n)
		}
	})

	t.Run("StorageTestSchema_AlreadyMigrated", func(t *testing.T) {
		t.Parallel()
		s := storagetest.New(t)
		applied, err := storage.Migrate(context.Background(), s.DB)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != 0 {
			t.Fatalf("re-running Migrate applied %v", applied)
		}
	})

	t.Run("Concurrent_MigratesOnce", func(t *testing.T) {
		t.Parallel()
		db := emptySchema(t)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total []int
			fns   []string
			errs  []error
		)
		for i := 0; i < 4; i++ {
			wg.Go(func() {
				m, err := storage.MigrateReport(context.Background(), db)
				mu.Lock()
				defer mu.Unlock()
				total = append(total, m.Versions...)
				fns = append(fns, m.Functions...)
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(errs) != 0 {
			t.Fatalf("concurrent Migrate failed: %v", errs)
		}
		if len(total) != migrationCount(t) {
			t.Fatalf("four concurrent runs applied %v in total, want each of %d once", total, migrationCount(t))
		}
		// The function files too: the first run applied them, the others found
		// their checksums recorded.
		if len(fns) != len(functionFileNames(t)) {
			t.Fatalf("four concurrent runs applied function files %v in total, want each of %d once", fns, len(functionFileNames(t)))
		}
	})
}
