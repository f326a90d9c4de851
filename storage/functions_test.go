package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"paysvc/storage"
)

// lastNumberedFunction is the last numbered migration that defines a function.
// Functions have been written in storage/functions since; a numbered migration
// after it may drop one, never define one.
const lastNumberedFunction = 48

// movedVerbatim pins each function file's statement as it was when its function
// moved out of the numbered migrations (the SHA-256 of the file from its CREATE
// on, so comments above it may change): while a statement is unchanged, the
// function it defines must be exactly the one those migrations left. A statement
// changed since is a deliberate change of the function, and is not compared.
var movedVerbatim = map[string]string{
	"paysvc_apply_invoice.sql":      "2b8397191e28d5eca7dc761117307bf1e219f38650ca74f1c92224b5606d06a1",
	"paysvc_apply_payout.sql":       "417c14c5173fa3456c45fbc9568e502609a1d98e543340737500eea4575e2aa7",
	"paysvc_apply_refund.sql":       "fc1ae285dbe03dd1061adf8fc52e4fbe71fb50bc617a9846fba2aa92f4d717a3",
	"paysvc_apply_subscription.sql": "6a7d7b963dd7f5f263baf6c40bc5930aa16ef3749aece0c4455db7ce6814bdcb",
	"paysvc_commit_batch_v2.sql":    "5fec9b585a050165c351ed365626e27d5dd9bc38585b64f42488de80a4e108b2",
	"paysvc_commit_batches_v2.sql":  "488c20d8b6f0bcc7fbfa036b5bebd2de0bc3cb5e853b07bde28fddedbbd0cd3d",
	"paysvc_commit_batches_v3.sql":  "d383f4617f0159fb82db50c3db0b95792c3917f23e1d9ba90f609b6302727a64",
	"paysvc_commit_batches_v4.sql":  "9ddd10505894c36f81d18ae09043a68332facedd20a9d2f6b54fc7f5b0dbde0e",
}

// functionFileNames lists storage/functions in name order (the order Migrate
// applies them in).
func functionFileNames(t *testing.T) []string {
	t.Helper()
	files, err := fs.Glob(os.DirFS("functions"), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no function files found: %v", err)
	}
	slices.Sort(files)
	return files
}

func functionFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("functions/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// functionDefs returns every function of the connection's schema, by signature
// (unqualified, e.g. paysvc_apply_refund(jsonb,timestamp with time zone)), with
// its pg_get_functiondef: the whole definition PostgreSQL runs, attributes and
// SET clauses included. The schema's name is taken out, so definitions of two
// schemas compare.
func functionDefs(t *testing.T, db *sqlx.DB) map[string]string {
	t.Helper()
	var rows []struct{ Sig, Def string }
	if err := db.SelectContext(context.Background(), &rows, `SELECT p.oid::regprocedure::text AS sig, pg_get_functiondef(p.oid) AS def
		FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.prokind <> 'a'`); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.GetContext(context.Background(), &schema, `SELECT current_schema()`); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.Sig] = strings.ReplaceAll(r.Def, schema+".", "")
	}
	return out
}

// filesOnlyDefs applies the function files alone, in order, to an empty schema:
// the functions as their files define them (PL/pgSQL bodies bind to tables when
// they run, so they need none to be created).
func filesOnlyDefs(t *testing.T) map[string]string {
	t.Helper()
	db := emptySchema(t)
	for _, f := range functionFileNames(t) {
		if _, err := db.ExecContext(context.Background(), string(functionFile(t, f))); err != nil {
			t.Fatalf("functions/%s alone: %v", f, err)
		}
	}
	return functionDefs(t, db)
}

// proname is a signature's function name.
func proname(sig string) string { name, _, _ := strings.Cut(sig, "("); return name }

func sameDefs(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: no functions to compare", what)
	}
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Fatalf("%s: functions\n%v\nwant\n%v", what, g, w)
	}
	for sig, def := range want {
		if got[sig] != def {
			t.Errorf("%s: %s is\n%s\nwant\n%s", what, sig, got[sig], def)
		}
	}
}

func TestFunctionFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EachFile_DefinesTheFunctionItIsNamedFor", func(t *testing.T) {
		t.Parallel()
		db := emptySchema(t)
		for _, f := range functionFileNames(t) {
			before := functionDefs(t, db)
			if _, err := db.ExecContext(ctx, string(functionFile(t, f))); err != nil {
				t.Fatalf("functions/%s: %v", f, err)
			}
			after := functionDefs(t, db)
			var added []string
			for sig, def := range after {
				if old, ok := before[sig]; !ok {
					added = append(added, sig)
				} else if old != def {
					t.Errorf("functions/%s changed %s, which an earlier file defines", f, sig)
				}
			}
			if len(added) != 1 || proname(added[0])+".sql" != f {
				t.Errorf("functions/%s defined %v, want one function named %s", f, added, strings.TrimSuffix(f, ".sql"))
			}
		}
	})

	// Whatever the numbered migrations defined on the way, a fresh database ends
	// with exactly the files' functions: every function they leave is redefined by
	// a file, and there is no other.
	t.Run("FreshDatabase_RunsExactlyTheFiles", func(t *testing.T) {
		t.Parallel()
		db := emptySchema(t)
		m, err := storage.MigrateReport(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.Functions, functionFileNames(t)) || m.SchemaAhead {
			t.Fatalf("applied function files %v (schema ahead %v), want all of %v", m.Functions, m.SchemaAhead, functionFileNames(t))
		}
		sameDefs(t, "fresh database", functionDefs(t, db), filesOnlyDefs(t))
		again, err := storage.MigrateReport(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Versions) != 0 || len(again.Functions) != 0 {
			t.Fatalf("second run applied %v and %v, want nothing", again.Versions, again.Functions)
		}
	})

	// A database as the release before the function files left it (every numbered
	// migration, no schema_functions) migrates to the files' functions, and those
	// moved unchanged are exactly what the numbered migrations had left.
	t.Run("PreviousRelease_UpgradesToTheFiles", func(t *testing.T) {
		t.Parallel()
		db := emptySchema(t)
		applyNumbered(t, db, lastNumberedFunction+1_000_000)
		numbered := functionDefs(t, db)
		m, err := storage.MigrateReport(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Versions) != 0 || !slices.Equal(m.Functions, functionFileNames(t)) {
			t.Fatalf("applied %v and function files %v, want no migration and every file", m.Versions, m.Functions)
		}
		upgraded := functionDefs(t, db)
		sameDefs(t, "upgraded database", upgraded, filesOnlyDefs(t))

		compared := 0
		for _, f := range functionFileNames(t) {
			b := functionFile(t, f)
			sum := sha256.Sum256(b[bytes.Index(b, []byte("CREATE OR REPLACE FUNCTION")):])
			if movedVerbatim[f] != hex.EncodeToString(sum[:]) {
				continue
			}
			for sig, def := range upgraded {
				if proname(sig)+".sql" != f {
					continue
				}
				compared++
				if numbered[sig] != def {
					t.Errorf("functions/%s, unchanged since the move, defines\n%s\nbut the numbered migrations left\n%s", f, def, numbered[sig])
				}
			}
		}
		t.Logf("%d functions compared with the numbered migrations' definitions", compared)
	})

	// A file whose checksum is not the recorded one (a release changed it) is
	// applied again, and only it; a file no longer in the tree is forgotten.
	t.Run("ChangedFile_IsAppliedAgain", func(t *testing.T) {
		t.Parallel()
		db := emptySchema(t)
		if _, err := storage.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		want := functionDefs(t, db)
		previousRelease(t, db, "paysvc_apply_refund")
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_functions (file, checksum) VALUES ('paysvc_retired.sql', 'x')`); err != nil {
			t.Fatal(err)
		}
		m, err := storage.MigrateReport(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Versions) != 0 || !slices.Equal(m.Functions, []string{"paysvc_apply_refund.sql"}) {
			t.Fatalf("applied %v and function files %v, want only paysvc_apply_refund.sql", m.Versions, m.Functions)
		}
		sameDefs(t, "after the changed file", functionDefs(t, db), want)
		var files []string
		if err := db.SelectContext(ctx, &files, `SELECT file FROM schema_functions ORDER BY file`); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(files, functionFileNames(t)) {
			t.Fatalf("schema_functions lists %v, want %v", files, functionFileNames(t))
		}
	})

	// A binary older than the schema (an instance of the previous release that
	// restarts during a rolling deploy) leaves the newer release's functions alone.
	t.Run("OlderBinary_LeavesTheFunctions", func(t *testing.T) {
		t.Parallel()
		db := emptySchema(t)
		if _, err := storage.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name)
			SELECT max(version) + 1, 'a_newer_release.up.sql' FROM schema_migrations`); err != nil {
			t.Fatal(err)
		}
		newer := previousRelease(t, db, "paysvc_apply_refund") // here: the newer release's body
		m, err := storage.MigrateReport(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if !m.SchemaAhead || len(m.Functions) != 0 || len(m.Versions) != 0 {
			t.Fatalf("older binary: %+v, want the schema ahead and nothing applied", m)
		}
		if got := functionDefs(t, db)[newer.sig]; got != newer.def {
			t.Fatalf("older binary replaced %s:\n%s", newer.sig, got)
		}
	})
}

type definedFunction struct{ sig, def string }

// previousRelease gives a function another body (a RAISE) and another recorded
// checksum, as a database migrated by a binary whose file differed would have.
func previousRelease(t *testing.T, db *sqlx.DB, name string) definedFunction {
	t.Helper()
	ctx := context.Background()
	q := `CREATE OR REPLACE FUNCTION ` + name + `(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'another release''s body';
END
$$`
	if _, err := db.ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE schema_functions SET checksum = 'another release' WHERE file = $1`, name+".sql"); err != nil {
		t.Fatal(err)
	}
	for sig, def := range functionDefs(t, db) {
		if proname(sig) == name {
			return definedFunction{sig, def}
		}
	}
	t.Fatalf("no function %s", name)
	return definedFunction{}
}

// The numbered migrations after the move define no function: a function's
// definition lives in its file only, so a reader opens one file to know what runs.
func TestNumberedMigrations_DefineNoFunctionAfterTheMove(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(os.DirFS("migrations"), "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	define := regexp.MustCompile(`(?i)\bCREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE)\b`)
	found := false
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(f, "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile("migrations/" + f)
		if err != nil {
			t.Fatal(err)
		}
		defines := define.Match(b)
		if v == lastNumberedFunction && defines {
			found = true
		}
		if v > lastNumberedFunction && defines {
			t.Errorf("migrations/%s defines a function: write it in storage/functions (docs/adr/0008-repeatable-functions.md)", f)
		}
	}
	if !found {
		t.Fatalf("migration %04d defines no function: lastNumberedFunction is wrong", lastNumberedFunction)
	}
}
