package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// noDatabase is a PAYSVC_DATABASE_URL that storage.Open refuses at once (wrong
// scheme): a command that should not touch the database fails fast, with an error
// that is not a usageError, if it does. Tests never fall back to the default URL,
// which is the developer's own database.
const noDatabase = "mysql://nowhere.invalid/none"

var (
	sandboxPublic = regexp.MustCompile(`^ISPubKey_test_[0-9a-f]{64}$`)
	sandboxSecret = regexp.MustCompile(`^ISSecretKey_test_[0-9a-f]{64}$`)
	livePublic    = regexp.MustCompile(`^ISPubKey_live_[0-9a-f]{64}$`)
	liveSecret    = regexp.MustCompile(`^ISSecretKey_live_[0-9a-f]{64}$`)
)

// result is what one run of the CLI produced.
type result struct {
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("err=%v\nstdout=%q\nstderr=%q", r.err, r.stdout, r.stderr)
}

// runCLI runs `paysvc args...` with exactly the given environment (nothing is read
// from the process environment).
func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	if _, ok := env["PAYSVC_DATABASE_URL"]; !ok {
		t.Fatal("test bug: every run must name PAYSVC_DATABASE_URL")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, append([]string{"paysvc"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// envFor is the environment of a CLI run against a test schema, plus extra pairs.
func envFor(s storagetest.Schema, kv ...string) map[string]string {
	return envWith(s.URL, kv...)
}

func envWith(dbURL string, kv ...string) map[string]string {
	env := map[string]string{"PAYSVC_DATABASE_URL": dbURL}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// decodeOne decodes stdout as exactly one JSON object with exactly the given keys.
func decodeOne(t *testing.T, stdout string, keys ...string) map[string]json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\nstdout=%q", err, stdout)
	}
	if obj == nil {
		t.Fatalf("stdout is JSON null, want an object: %q", stdout)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON value (next: %s, err %v): %q", extra, err, stdout)
	}
	if keys != nil {
		got := make([]string, 0, len(obj))
		for k := range obj {
			got = append(got, k)
		}
		want := slices.Clone(keys)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("stdout keys = %v, want exactly %v\nstdout=%q", got, want, stdout)
		}
	}
	return obj
}

func str(t *testing.T, obj map[string]json.RawMessage, key string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(obj[key], &s); err != nil {
		t.Fatalf("%s = %s: not a string: %v", key, obj[key], err)
	}
	return s
}

func wantUsage(t *testing.T, r result) {
	t.Helper()
	var ue usageError
	if !errors.As(r.err, &ue) {
		t.Fatalf("want a usageError, got %T\n%v", r.err, r)
	}
}

// wantFailure checks a failed run that is not a usage error and printed nothing.
func wantFailure(t *testing.T, r result, contains string) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("want an error\n%v", r)
	}
	var ue usageError
	if errors.As(r.err, &ue) {
		t.Fatalf("want a plain error, got a usageError\n%v", r)
	}
	if contains != "" && !strings.Contains(r.err.Error(), contains) {
		t.Fatalf("error %q does not mention %q", r.err, contains)
	}
	if r.stdout != "" {
		t.Fatalf("a failed command printed to stdout: %q", r.stdout)
	}
}

func count(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.GetContext(t.Context(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func exec(t *testing.T, db *sqlx.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// created is the output of `merchant create`.
type created struct {
	MerchantID, PublicKey, SecretKey string
}

func createMerchant(t *testing.T, s storagetest.Schema, extra ...string) created {
	t.Helper()
	r := runCLI(t, envFor(s), append([]string{"merchant", "create", "--name", "Acme"}, extra...)...)
	if r.err != nil {
		t.Fatalf("merchant create: %v", r)
	}
	obj := decodeOne(t, r.stdout, "merchant_id", "public_key", "secret_key")
	return created{MerchantID: str(t, obj, "merchant_id"), PublicKey: str(t, obj, "public_key"), SecretKey: str(t, obj, "secret_key")}
}

// issued is the output of `key create`.
type issued struct {
	KeyID       string   `json:"key_id"`
	Key         string   `json:"secret_key"`
	Permissions []string `json:"permissions"`
}

func createKey(t *testing.T, s storagetest.Schema, merchantID, perms string) issued {
	t.Helper()
	r := runCLI(t, envFor(s), "key", "create", "--merchant", merchantID, "--permissions", perms)
	if r.err != nil {
		t.Fatalf("key create: %v", r)
	}
	decodeOne(t, r.stdout, "key_id", "secret_key", "permissions", "unrestricted")
	var k issued
	if err := json.Unmarshal([]byte(r.stdout), &k); err != nil {
		t.Fatal(err)
	}
	return k
}

// checkStoredKey verifies that a key is stored only as its SHA-256 hash, under a
// key id that is a strict (and short) prefix of it, and nowhere as text.
func checkStoredKey(t *testing.T, db *sqlx.DB, merchantID, key, kind, env string) (keyID string) {
	t.Helper()
	var row struct {
		KeyID       string `db:"key_id"`
		MerchantID  string `db:"merchant_id"`
		Kind        string `db:"kind"`
		Environment string `db:"environment"`
		Revoked     bool   `db:"revoked"`
	}
	err := db.GetContext(t.Context(), &row, `SELECT key_id, merchant_id, kind, environment, revoked_at IS NOT NULL AS revoked
		FROM api_keys WHERE key_hash = sha256(convert_to($1, 'UTF8'))`, key)
	if err != nil {
		t.Fatalf("no api_keys row whose key_hash is sha256 of the printed key: %v", err)
	}
	if row.MerchantID != merchantID || row.Kind != kind || row.Environment != env || row.Revoked {
		t.Fatalf("stored key %+v, want merchant %s, kind %s, environment %s, not revoked", row, merchantID, kind, env)
	}
	if !strings.HasPrefix(key, row.KeyID) || len(row.KeyID) >= len(key) {
		t.Fatalf("key_id %q is not a strict prefix of the key %q", row.KeyID, key)
	}
	// The id is shown to operators: it must leave most of the 256 random bits hidden.
	if hidden := len(key) - len(row.KeyID); hidden < 32 {
		t.Fatalf("key_id %q reveals all but %d characters of the key", row.KeyID, hidden)
	}
	if n := count(t, db, `SELECT count(*) FROM api_keys WHERE key_id = $1`, key); n != 0 {
		t.Fatalf("%d api_keys rows have the full key as key_id", n)
	}
	for _, table := range []string{"api_keys", "merchants", "wallets"} {
		q := fmt.Sprintf(`SELECT count(*) FROM %s x WHERE strpos(row_to_json(x)::text, $1) > 0`, table)
		if n := count(t, db, q, key); n != 0 {
			t.Fatalf("%d %s rows contain the key text", n, table)
		}
	}
	return row.KeyID
}

func TestMerchantCreate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		env       []string // extra environment
		args      []string // extra flags
		wantEnv   string
		pub, sec  *regexp.Regexp
		wantMerch string
	}{
		{name: "sandbox_by_default_issues_test_keys", wantEnv: "sandbox", pub: sandboxPublic, sec: sandboxSecret},
		{name: "live_environment_issues_live_keys", env: []string{"PAYSVC_ENVIRONMENT", "live"}, wantEnv: "live", pub: livePublic, sec: liveSecret},
		{name: "environment_flag_overrides_configuration", env: []string{"PAYSVC_ENVIRONMENT", "sandbox"}, args: []string{"--environment", "live"},
			wantEnv: "live", pub: livePublic, sec: liveSecret},
		{name: "explicit_sandbox_in_live_configuration", env: []string{"PAYSVC_ENVIRONMENT", "live"}, args: []string{"--environment", "sandbox"},
			wantEnv: "sandbox", pub: sandboxPublic, sec: sandboxSecret},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			r := runCLI(t, envFor(s, tc.env...), append([]string{"merchant", "create", "--name", "Acme"}, tc.args...)...)
			if r.err != nil {
				t.Fatalf("merchant create: %v", r)
			}
			obj := decodeOne(t, r.stdout, "merchant_id", "public_key", "secret_key")
			id, pub, sec := str(t, obj, "merchant_id"), str(t, obj, "public_key"), str(t, obj, "secret_key")
			if !tc.pub.MatchString(pub) {
				t.Errorf("public_key %q does not match %s", pub, tc.pub)
			}
			if !tc.sec.MatchString(sec) {
				t.Errorf("secret_key %q does not match %s", sec, tc.sec)
			}
			if strings.Contains(r.stderr, sec) || strings.Contains(r.stderr, pub) {
				t.Errorf("a key was written to stderr: %q", r.stderr)
			}

			var m struct {
				Name        string `db:"name"`
				Environment string `db:"environment"`
				Enabled     bool   `db:"enabled"`
			}
			if err := s.DB.GetContext(t.Context(), &m, `SELECT name, environment, enabled FROM merchants WHERE merchant_id = $1`, id); err != nil {
				t.Fatalf("merchant %s not stored: %v", id, err)
			}
			if m.Name != "Acme" || m.Environment != tc.wantEnv || !m.Enabled {
				t.Errorf("stored merchant %+v, want Acme, %s, enabled", m, tc.wantEnv)
			}
			if n := count(t, s.DB, `SELECT count(*) FROM merchants`); n != 1 {
				t.Errorf("%d merchants stored, want 1", n)
			}

			if n := count(t, s.DB, `SELECT count(*) FROM api_keys WHERE merchant_id = $1`, id); n != 2 {
				t.Errorf("%d api_keys rows, want 2 (public and secret)", n)
			}
			checkStoredKey(t, s.DB, id, pub, "public", tc.wantEnv)
			checkStoredKey(t, s.DB, id, sec, "secret", tc.wantEnv)
			// The merchant's main key is unrestricted by its flag, not by an empty list.
			if n := count(t, s.DB, `SELECT count(*) FROM api_keys WHERE merchant_id = $1 AND unrestricted = (kind = 'secret')`, id); n != 2 {
				t.Errorf("%d of the 2 keys have unrestricted set exactly for the secret key", n)
			}

			var wallets []struct {
				MerchantID string `db:"merchant_id"`
				Currency   string `db:"currency"`
				Type       string `db:"wallet_type"`
				Current    string `db:"current_balance"`
				Available  string `db:"available_balance"`
			}
			if err := s.DB.SelectContext(t.Context(), &wallets, `SELECT merchant_id, currency, wallet_type,
				current_balance::text AS current_balance, available_balance::text AS available_balance FROM wallets`); err != nil {
				t.Fatal(err)
			}
			if len(wallets) != 1 {
				t.Fatalf("%d wallets stored, want exactly 1: %+v", len(wallets), wallets)
			}
			w := wallets[0]
			if w.MerchantID != id || w.Currency != "KES" || w.Type != "SETTLEMENT" || w.Current != "0.00" || w.Available != "0.00" {
				t.Errorf("wallet %+v, want %s's KES SETTLEMENT wallet with balance 0.00", w, id)
			}
		})
	}
}

func TestMerchantCreateRefusesAndWritesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		args      []string
		usage     bool
		errSubstr string
	}{
		{name: "without_name", args: nil, errSubstr: "--name"},
		{name: "empty_name", args: []string{"--name", ""}, errSubstr: "--name"},
		{name: "blank_name", args: []string{"--name", "   "}, errSubstr: "--name"},
		{name: "name_over_200_characters", args: []string{"--name", strings.Repeat("a", 201)}, errSubstr: "--name"},
		{name: "unknown_environment", args: []string{"--name", "Acme", "--environment", "staging"}, errSubstr: "staging"},
		{name: "unknown_flag_is_usage_error", args: []string{"--name", "Acme", "--colour", "red"}, usage: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			r := runCLI(t, envFor(s), append([]string{"merchant", "create"}, tc.args...)...)
			if tc.usage {
				wantUsage(t, r)
				if r.stdout != "" {
					t.Errorf("stdout %q, want nothing", r.stdout)
				}
			} else {
				wantFailure(t, r, tc.errSubstr)
			}
			for _, table := range []string{"merchants", "api_keys", "wallets"} {
				if n := count(t, s.DB, `SELECT count(*) FROM `+table); n != 0 {
					t.Errorf("%d rows written to %s", n, table)
				}
			}
		})
	}
}

func TestKeyCreate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		merchant  []string // merchant create flags
		args      func(merchantID string) []string
		wantPerms []string // nil: the command fails
		// unrestricted: the key is asked for with --unrestricted and stored with
		// the flag (and no list); every other key is stored without it.
		unrestricted bool
		errSubstr    string
		usage        bool
		sec          *regexp.Regexp
	}{
		{
			name:      "issues_key_with_given_permissions",
			args:      func(id string) []string { return []string{"--merchant", id, "--permissions", "add_files,view_files"} },
			wantPerms: []string{"add_files", "view_files"}, sec: sandboxSecret,
		},
		{
			name: "spaces_around_permissions_are_ignored",
			args: func(id string) []string {
				return []string{"--merchant", id, "--permissions", " add_files , view_files "}
			},
			wantPerms: []string{"add_files", "view_files"}, sec: sandboxSecret,
		},
		{
			name:      "live_merchant_gets_live_key",
			merchant:  []string{"--environment", "live"},
			args:      func(id string) []string { return []string{"--merchant", id, "--permissions", "change_files"} },
			wantPerms: []string{"change_files"}, sec: liveSecret,
		},
		{
			name: "permissions_beyond_files",
			args: func(id string) []string {
				return []string{"--merchant", id, "--permissions", "view_wallets,add_transfers,approve_files,change_webhooks"}
			},
			wantPerms: []string{"view_wallets", "add_transfers", "approve_files", "change_webhooks"}, sec: sandboxSecret,
		},
		{
			name:      "near_miss_permission_is_error",
			args:      func(id string) []string { return []string{"--merchant", id, "--permissions", "view_wallet"} },
			errSubstr: "view_wallet",
		},
		{
			name:      "unknown_permission_is_error",
			args:      func(id string) []string { return []string{"--merchant", id, "--permissions", "add_files,delete_files"} },
			errSubstr: "delete_files",
		},
		{
			name: "unknown_merchant_is_error",
			args: func(string) []string {
				return []string{"--merchant", "MERNOSUCH01", "--permissions", "add_files,view_files"}
			},
			errSubstr: "MERNOSUCH01",
		},
		{
			name:      "missing_merchant_is_error",
			args:      func(string) []string { return []string{"--permissions", "add_files"} },
			errSubstr: "not found",
		},
		{
			name:      "no_permissions_flag_is_error",
			args:      func(id string) []string { return []string{"--merchant", id} },
			errSubstr: "--permissions",
		},
		{
			name:      "empty_permissions_is_error",
			args:      func(id string) []string { return []string{"--merchant", id, "--permissions", ""} },
			errSubstr: "--permissions",
		},
		{
			name:      "only_commas_is_error",
			args:      func(id string) []string { return []string{"--merchant", id, "--permissions", " , ,"} },
			errSubstr: "--permissions",
		},
		{
			name:      "unrestricted_key_is_asked_for_by_name",
			args:      func(id string) []string { return []string{"--merchant", id, "--unrestricted"} },
			wantPerms: []string{}, unrestricted: true, sec: sandboxSecret,
		},
		{
			name: "unrestricted_with_permissions_is_usage_error",
			args: func(id string) []string {
				return []string{"--merchant", id, "--unrestricted", "--permissions", "view_wallets"}
			},
			usage: true,
		},
		{
			name:      "unrestricted_for_unknown_merchant_is_error",
			args:      func(string) []string { return []string{"--merchant", "MERNOSUCH01", "--unrestricted"} },
			errSubstr: "MERNOSUCH01",
		},
		{
			name: "unknown_flag_is_usage_error",
			args: func(id string) []string {
				return []string{"--merchant", id, "--permissions", "add_files", "--ttl", "1h"}
			},
			usage: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			m := createMerchant(t, s, tc.merchant...)
			before := count(t, s.DB, `SELECT count(*) FROM api_keys`)
			r := runCLI(t, envFor(s), append([]string{"key", "create"}, tc.args(m.MerchantID)...)...)
			if tc.wantPerms == nil {
				if tc.usage {
					wantUsage(t, r)
				} else {
					wantFailure(t, r, tc.errSubstr)
				}
				if after := count(t, s.DB, `SELECT count(*) FROM api_keys`); after != before {
					t.Errorf("a refused key create stored %d keys", after-before)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("key create: %v", r)
			}
			obj := decodeOne(t, r.stdout, "key_id", "secret_key", "permissions", "unrestricted")
			keyID, key := str(t, obj, "key_id"), str(t, obj, "secret_key")
			var perms []string
			if err := json.Unmarshal(obj["permissions"], &perms); err != nil {
				t.Fatalf("permissions %s: %v", obj["permissions"], err)
			}
			if !slices.Equal(perms, tc.wantPerms) {
				t.Errorf("printed permissions %v, want %v", perms, tc.wantPerms)
			}
			if !tc.sec.MatchString(key) {
				t.Errorf("secret_key %q does not match %s", key, tc.sec)
			}
			env := "sandbox"
			if tc.sec == liveSecret {
				env = "live"
			}
			if stored := checkStoredKey(t, s.DB, m.MerchantID, key, "secret", env); stored != keyID {
				t.Errorf("printed key_id %q, stored %q", keyID, stored)
			}
			var row struct {
				Perms        pq.StringArray `db:"permissions"`
				Unrestricted bool           `db:"unrestricted"`
			}
			if err := s.DB.GetContext(t.Context(), &row, `SELECT permissions, unrestricted FROM api_keys WHERE key_id = $1`, keyID); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(row.Perms, tc.wantPerms) || row.Unrestricted != tc.unrestricted {
				t.Errorf("stored permissions %v unrestricted %v, want %v %v", row.Perms, row.Unrestricted, tc.wantPerms, tc.unrestricted)
			}
			var printed bool
			if err := json.Unmarshal(obj["unrestricted"], &printed); err != nil || printed != tc.unrestricted {
				t.Errorf("printed unrestricted %s, want %v", obj["unrestricted"], tc.unrestricted)
			}
			if after := count(t, s.DB, `SELECT count(*) FROM api_keys`); after != before+1 {
				t.Errorf("key create stored %d keys, want 1", after-before)
			}
		})
	}
}

func TestKeyRevoke(t *testing.T) {
	t.Parallel()
	type fixture struct {
		s storagetest.Schema
		m created
		k issued // a restricted key of m
	}
	revokedAt := func(t *testing.T, db *sqlx.DB, keyID string) bool {
		t.Helper()
		var revoked bool
		if err := db.GetContext(t.Context(), &revoked, `SELECT revoked_at IS NOT NULL FROM api_keys WHERE key_id = $1`, keyID); err != nil {
			t.Fatalf("key %s: %v", keyID, err)
		}
		return revoked
	}
	cases := []struct {
		name      string
		before    func(t *testing.T, f fixture) // optional
		args      func(f fixture) []string
		wantID    func(f fixture) string // "" : the command fails
		usage     bool
		errSubstr string
	}{
		{
			name:   "key_id_revokes_the_key",
			args:   func(f fixture) []string { return []string{f.k.KeyID} },
			wantID: func(f fixture) string { return f.k.KeyID },
		},
		{
			name:   "full_key_text_revokes_the_key",
			args:   func(f fixture) []string { return []string{f.k.Key} },
			wantID: func(f fixture) string { return f.k.KeyID },
		},
		{
			// Only the key id or the whole key identify a key: anything in between
			// cannot be checked against the stored hash.
			name:      "partial_key_longer_than_key_id_is_not_a_key",
			args:      func(f fixture) []string { return []string{f.k.Key[:len(f.k.KeyID)+10]} },
			errSubstr: "no live key",
		},
		{
			name:   "merchant_public_key_can_be_revoked_by_full_text",
			args:   func(f fixture) []string { return []string{f.m.PublicKey} },
			wantID: func(f fixture) string { return f.m.PublicKey[:len("ISPubKey_test_")+12] },
		},
		{
			name: "revoking_again_is_error",
			before: func(t *testing.T, f fixture) {
				if r := runCLI(t, envFor(f.s), "key", "revoke", f.k.KeyID); r.err != nil {
					t.Fatalf("first revoke: %v", r)
				}
			},
			args:      func(f fixture) []string { return []string{f.k.KeyID} },
			errSubstr: "no live key",
		},
		{
			name: "revoking_by_full_key_after_revoking_by_id_is_error",
			before: func(t *testing.T, f fixture) {
				if r := runCLI(t, envFor(f.s), "key", "revoke", f.k.KeyID); r.err != nil {
					t.Fatalf("first revoke: %v", r)
				}
			},
			args:      func(f fixture) []string { return []string{f.k.Key} },
			errSubstr: "no live key",
		},
		{
			name:      "unknown_key_is_error",
			args:      func(fixture) []string { return []string{"ISSecretKey_test_000000000000"} },
			errSubstr: "no live key",
		},
		{
			// A prefix without the key's random part would name every key.
			name:  "prefix_without_random_part_is_usage_error",
			args:  func(fixture) []string { return []string{"ISSecretKey_test"} },
			usage: true,
		},
		{
			name:  "too_short_prefix_is_usage_error",
			args:  func(f fixture) []string { return []string{f.k.KeyID[:15]} },
			usage: true,
		},
		{
			name:  "missing_prefix_is_usage_error",
			args:  func(fixture) []string { return nil },
			usage: true,
		},
		{
			name:  "two_prefixes_is_usage_error",
			args:  func(f fixture) []string { return []string{f.k.KeyID, f.m.SecretKey} },
			usage: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			m := createMerchant(t, s)
			f := fixture{s: s, m: m, k: createKey(t, s, m.MerchantID, "add_files,view_files")}
			if tc.before != nil {
				tc.before(t, f)
			}
			var liveBefore []string
			if err := s.DB.SelectContext(t.Context(), &liveBefore, `SELECT key_id FROM api_keys WHERE revoked_at IS NULL ORDER BY key_id`); err != nil {
				t.Fatal(err)
			}

			r := runCLI(t, envFor(s), append([]string{"key", "revoke"}, tc.args(f)...)...)

			var liveAfter []string
			if err := s.DB.SelectContext(t.Context(), &liveAfter, `SELECT key_id FROM api_keys WHERE revoked_at IS NULL ORDER BY key_id`); err != nil {
				t.Fatal(err)
			}
			if tc.wantID == nil {
				if tc.usage {
					wantUsage(t, r)
					if r.stdout != "" {
						t.Errorf("stdout %q, want nothing", r.stdout)
					}
				} else {
					wantFailure(t, r, tc.errSubstr)
				}
				if !slices.Equal(liveBefore, liveAfter) {
					t.Errorf("a refused revoke changed the live keys from %v to %v", liveBefore, liveAfter)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("key revoke: %v", r)
			}
			want := tc.wantID(f)
			obj := decodeOne(t, r.stdout, "revoked")
			if got := str(t, obj, "revoked"); got != want {
				t.Errorf("printed revoked %q, want %q", got, want)
			}
			if !revokedAt(t, s.DB, want) {
				t.Errorf("key %s has no revoked_at", want)
			}
			wantLive := slices.DeleteFunc(slices.Clone(liveBefore), func(id string) bool { return id == want })
			if !slices.Equal(liveAfter, wantLive) {
				t.Errorf("live keys after revoke %v, want %v (only %s revoked)", liveAfter, wantLive, want)
			}
		})
	}
}

func TestMerchantEnableDisable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		steps       []string // commands run first, each must succeed
		cmd         string
		id          string // "" : the created merchant
		extra       []string
		wantEnabled bool // the created merchant's state afterwards
		fail        bool
		usage       bool
	}{
		{name: "disable_turns_enabled_off", cmd: "disable", wantEnabled: false},
		{name: "enable_after_disable_turns_it_on", steps: []string{"disable"}, cmd: "enable", wantEnabled: true},
		{name: "disable_twice_stays_disabled", steps: []string{"disable"}, cmd: "disable", wantEnabled: false},
		{name: "enable_when_enabled_stays_enabled", cmd: "enable", wantEnabled: true},
		{name: "disable_unknown_id_is_error", cmd: "disable", id: "MERNOSUCH01", fail: true, wantEnabled: true},
		{name: "enable_unknown_id_is_error", steps: []string{"disable"}, cmd: "enable", id: "MERNOSUCH01", fail: true, wantEnabled: false},
		{name: "extra_argument_is_usage_error", cmd: "disable", extra: []string{"now"}, usage: true, wantEnabled: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			m := createMerchant(t, s)
			for _, step := range tc.steps {
				if r := runCLI(t, envFor(s), "merchant", step, m.MerchantID); r.err != nil {
					t.Fatalf("merchant %s: %v", step, r)
				}
			}
			id := tc.id
			if id == "" {
				id = m.MerchantID
			}
			r := runCLI(t, envFor(s), append([]string{"merchant", tc.cmd, id}, tc.extra...)...)
			switch {
			case tc.usage:
				wantUsage(t, r)
			case tc.fail:
				wantFailure(t, r, id)
			default:
				if r.err != nil {
					t.Fatalf("merchant %s: %v", tc.cmd, r)
				}
				obj := decodeOne(t, r.stdout, "merchant_id", "enabled")
				if got := str(t, obj, "merchant_id"); got != id {
					t.Errorf("printed merchant_id %q, want %q", got, id)
				}
				if got := string(obj["enabled"]); got != strconv.FormatBool(tc.cmd == "enable") {
					t.Errorf("printed enabled %s after %s", got, tc.cmd)
				}
			}
			var enabled bool
			if err := s.DB.GetContext(t.Context(), &enabled, `SELECT enabled FROM merchants WHERE merchant_id = $1`, m.MerchantID); err != nil {
				t.Fatal(err)
			}
			if enabled != tc.wantEnabled {
				t.Errorf("merchants.enabled = %v, want %v", enabled, tc.wantEnabled)
			}
			if n := count(t, s.DB, `SELECT count(*) FROM merchants`); n != 1 {
				t.Errorf("%d merchants, want 1", n)
			}
		})
	}
}

// dropWalletChecks removes the CHECK constraints of the schema's wallets table
// (named from pg_constraint), so that a corrupt snapshot can be written.
func dropWalletChecks(t *testing.T, db *sqlx.DB) {
	t.Helper()
	var names []string
	if err := db.SelectContext(t.Context(), &names, `SELECT conname FROM pg_constraint
		WHERE conrelid = 'wallets'::regclass AND contype = 'c'`); err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("wallets has no CHECK constraint")
	}
	for _, n := range names {
		exec(t, db, fmt.Sprintf(`ALTER TABLE wallets DROP CONSTRAINT %q`, n))
	}
}

func TestLedgerCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		setup        func(t *testing.T, s storagetest.Schema) (walletID string) // optional
		args         []string
		wantOK       bool
		wantMismatch bool // the wallet is listed in wallet_mismatches
		wantNegative bool // the wallet is listed in negative_wallets
		usage        bool
	}{
		{name: "fresh_schema_is_ok", args: []string{"check"}, wantOK: true},
		{
			name: "new_merchant_with_empty_wallet_is_ok",
			setup: func(t *testing.T, s storagetest.Schema) string {
				createMerchant(t, s)
				return ""
			},
			args: []string{"check"}, wantOK: true,
		},
		{
			name: "wallet_snapshot_off_its_entries_fails",
			setup: func(t *testing.T, s storagetest.Schema) string {
				m := createMerchant(t, s)
				var w string
				if err := s.DB.GetContext(t.Context(), &w, `UPDATE wallets SET current_balance = 5.00
					WHERE merchant_id = $1 RETURNING wallet_id`, m.MerchantID); err != nil {
					t.Fatal(err)
				}
				return w
			},
			args: []string{"check"}, wantMismatch: true,
		},
		{
			name: "negative_wallet_fails",
			setup: func(t *testing.T, s storagetest.Schema) string {
				m := createMerchant(t, s)
				dropWalletChecks(t, s.DB)
				var w string
				if err := s.DB.GetContext(t.Context(), &w, `UPDATE wallets SET current_balance = -1.00, available_balance = -1.00
					WHERE merchant_id = $1 RETURNING wallet_id`, m.MerchantID); err != nil {
					t.Fatal(err)
				}
				return w
			},
			args: []string{"check"}, wantNegative: true,
		},
		{name: "no_subcommand_is_usage_error", args: nil, usage: true},
		{name: "unknown_subcommand_is_usage_error", args: []string{"repair"}, usage: true},
		{name: "extra_argument_is_usage_error", args: []string{"check", "now"}, usage: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			var walletID string
			if tc.setup != nil {
				walletID = tc.setup(t, s)
			}
			r := runCLI(t, envFor(s), append([]string{"ledger"}, tc.args...)...)
			if tc.usage {
				wantUsage(t, r)
				if r.stdout != "" {
					t.Errorf("stdout %q, want nothing", r.stdout)
				}
				return
			}
			switch {
			case tc.wantOK && r.err != nil:
				t.Fatalf("ledger check failed on a sound ledger: %v", r)
			case !tc.wantOK && r.err == nil:
				t.Fatalf("ledger check returned nil on a corrupt ledger\n%v", r)
			}
			obj := decodeOne(t, r.stdout)
			var ok bool
			if err := json.Unmarshal(obj["ok"], &ok); err != nil {
				t.Fatalf(`"ok" = %s: %v`, obj["ok"], err)
			}
			if ok != tc.wantOK {
				t.Errorf(`printed "ok": %v, want %v`, ok, tc.wantOK)
			}
			list := func(key string) []string {
				var l []string
				if err := json.Unmarshal(obj[key], &l); err != nil {
					t.Fatalf("%s = %s: %v", key, obj[key], err)
				}
				return l
			}
			if got := slices.Contains(list("wallet_mismatches"), walletID); got != tc.wantMismatch {
				t.Errorf("wallet_mismatches %s lists %q: %v, want %v", obj["wallet_mismatches"], walletID, got, tc.wantMismatch)
			}
			if got := slices.Contains(list("negative_wallets"), walletID); got != tc.wantNegative {
				t.Errorf("negative_wallets %s lists %q: %v, want %v", obj["negative_wallets"], walletID, got, tc.wantNegative)
			}
		})
	}
}

// migrationVersions lists the versions of the migrations in storage/migrations.
func migrationVersions(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("../../storage/migrations")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".up.sql") {
			continue
		}
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		vs = append(vs, v)
	}
	sort.Ints(vs)
	if len(vs) == 0 {
		t.Fatal("no migrations found")
	}
	return vs
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		empty     bool // start from an empty schema instead of a migrated one
		wantFirst []int
	}{
		{name: "empty_schema_gets_every_migration_then_none", empty: true, wantFirst: migrationVersions(t)},
		{name: "migrated_schema_gets_none", empty: false, wantFirst: nil},
	}
	applied := func(t *testing.T, r result) []int {
		t.Helper()
		if r.err != nil {
			t.Fatalf("migrate: %v", r)
		}
		obj := decodeOne(t, r.stdout, "applied")
		var vs []int
		if err := json.Unmarshal(obj["applied"], &vs); err != nil {
			t.Fatalf("applied = %s: %v", obj["applied"], err)
		}
		return vs
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			if tc.empty {
				exec(t, s.DB, fmt.Sprintf(`DROP SCHEMA %s CASCADE; CREATE SCHEMA %[1]s`, s.Name))
			}
			if got := applied(t, runCLI(t, envFor(s), "migrate")); !slices.Equal(got, tc.wantFirst) {
				t.Errorf("first migrate applied %v, want %v", got, tc.wantFirst)
			}
			if got := applied(t, runCLI(t, envFor(s), "migrate")); len(got) != 0 {
				t.Errorf("second migrate applied %v, want nothing", got)
			}
			if n := count(t, s.DB, `SELECT count(*) FROM schema_migrations`); n != len(migrationVersions(t)) {
				t.Errorf("schema_migrations has %d rows, want %d", n, len(migrationVersions(t)))
			}
			// The migrated schema is usable by the admin commands.
			createMerchant(t, s)
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		args       []string // after the program name; nil with noProgram: no args at all
		noProgram  bool
		wantUsage  bool
		wantStdout string // substring of stdout for successful runs
		errSubstr  string
	}{
		{name: "no_arguments_at_all_is_usage_error", noProgram: true, wantUsage: true, errSubstr: "merchant create"},
		{name: "no_command_is_usage_error", args: nil, wantUsage: true, errSubstr: "merchant create"},
		{name: "unknown_command_is_usage_error", args: []string{"frobnicate"}, wantUsage: true, errSubstr: `"frobnicate"`},
		{name: "help_prints_usage", args: []string{"help"}, wantStdout: "merchant create"},
		{name: "dash_h_prints_usage", args: []string{"-h"}, wantStdout: "merchant create"},
		{name: "dash_dash_help_prints_usage", args: []string{"--help"}, wantStdout: "key revoke KEYPREFIX"},
		{name: "merchant_without_subcommand_is_usage_error", args: []string{"merchant"}, wantUsage: true},
		{name: "key_without_subcommand_is_usage_error", args: []string{"key"}, wantUsage: true},
		// The load generator left this binary: the old command says where it went.
		{name: "bench_points_at_paysvc_bench", args: []string{"bench", "--scenario", "transfer-hot"}, wantUsage: true, errSubstr: "paysvc-bench"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r result
			if tc.noProgram {
				var stdout, stderr bytes.Buffer
				env := envWith(noDatabase)
				err := run(t.Context(), nil, func(k string) string { return env[k] }, &stdout, &stderr)
				r = result{stdout: stdout.String(), stderr: stderr.String(), err: err}
			} else {
				r = runCLI(t, envWith(noDatabase), tc.args...)
			}
			if tc.wantUsage {
				wantUsage(t, r)
				if tc.errSubstr != "" && !strings.Contains(r.err.Error(), tc.errSubstr) {
					t.Errorf("usage error %q does not contain %q", r.err, tc.errSubstr)
				}
				if r.stdout != "" {
					t.Errorf("stdout %q, want nothing", r.stdout)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("want success: %v", r)
			}
			if !strings.Contains(r.stdout, tc.wantStdout) {
				t.Errorf("stdout %q does not contain %q", r.stdout, tc.wantStdout)
			}
		})
	}
}

// Subcommands that are only checked after connecting are still usage errors.
func TestUnknownSubcommandIsUsageError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
	}{
		{name: "merchant_unknown_subcommand", args: []string{"merchant", "delete", "MER1"}},
		{name: "key_unknown_subcommand", args: []string{"key", "rotate", "ISSecretKey_test_000000000000"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			r := runCLI(t, envFor(s), tc.args...)
			wantUsage(t, r)
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
}

func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		env      []string
		args     []string
		variable string // the error names it
	}{
		{name: "staging_environment_refused_for_merchant_create", env: []string{"PAYSVC_ENVIRONMENT", "staging"},
			args: []string{"merchant", "create", "--name", "Acme"}, variable: "PAYSVC_ENVIRONMENT"},
		{name: "staging_environment_refused_for_migrate", env: []string{"PAYSVC_ENVIRONMENT", "staging"},
			args: []string{"migrate"}, variable: "PAYSVC_ENVIRONMENT"},
		{name: "staging_environment_refused_for_key_create", env: []string{"PAYSVC_ENVIRONMENT", "staging"},
			args: []string{"key", "create", "--merchant", "MER1", "--permissions", "add_files"}, variable: "PAYSVC_ENVIRONMENT"},
		{name: "unknown_log_level_refused", env: []string{"PAYSVC_LOG_LEVEL", "loud"},
			args: []string{"merchant", "create", "--name", "Acme"}, variable: "PAYSVC_LOG_LEVEL"},
		{name: "non_numeric_partitions_refused", env: []string{"PAYSVC_COMMAND_PARTITIONS", "many"},
			args: []string{"merchant", "create", "--name", "Acme"}, variable: "PAYSVC_COMMAND_PARTITIONS"},
		// A namespace Kafka cannot put in a topic name would fail at the first topic.
		{name: "kafka_namespace_outside_the_topic_charset_refused", env: []string{"PAYSVC_KAFKA_NAMESPACE", "staging/"},
			args: []string{"serve"}, variable: "PAYSVC_KAFKA_NAMESPACE"},
		{name: "bad_trusted_proxy_refused", env: []string{"PAYSVC_TRUSTED_PROXIES", "10.0.0.0/8, proxy.internal"},
			args: []string{"merchant", "create", "--name", "Acme"}, variable: "PAYSVC_TRUSTED_PROXIES"},
		// A reply trimmed before its key expires would turn a legitimate retry into a 409.
		{name: "reply_retention_shorter_than_idempotency_ttl_refused",
			env:  []string{"PAYSVC_IDEMPOTENCY_TTL", "48h", "PAYSVC_COMMAND_REPLY_RETENTION", "24h"},
			args: []string{"merchant", "create", "--name", "Acme"}, variable: "PAYSVC_COMMAND_REPLY_RETENTION"},
		// The token alone authenticates Daraja's callbacks: a short one is guessable.
		{name: "short_daraja_callback_token_refused", env: []string{"PAYSVC_DARAJA_CALLBACK_TOKEN", "0123456789abcdef0123456789abcde"},
			args: []string{"merchant", "create", "--name", "Acme"}, variable: "PAYSVC_DARAJA_CALLBACK_TOKEN"},
		{name: "short_daraja_callback_token_refused_for_serve", env: []string{"PAYSVC_DARAJA_CALLBACK_TOKEN", "cb-secret"},
			args: []string{"serve"}, variable: "PAYSVC_DARAJA_CALLBACK_TOKEN"},
		{name: "daraja_callback_token_outside_a_path_segment_refused",
			env:  []string{"PAYSVC_DARAJA_CALLBACK_TOKEN", "0123456789abcdef/0123456789abcdef"},
			args: []string{"merchant", "create", "--name", "Acme"}, variable: "PAYSVC_DARAJA_CALLBACK_TOKEN"},
		// Daraja would take requests whose results could never come back.
		{name: "daraja_without_callback_token_refused", env: []string{"PAYSVC_DARAJA_CONSUMER_KEY", "ck", "PAYSVC_DARAJA_CALLBACK_BASE_URL", "https://pay.example.com"},
			args: []string{"serve"}, variable: "PAYSVC_DARAJA_CALLBACK_TOKEN"},
		// A live server has no default Daraja root: Safaricom's sandbox would have
		// answered, and its outcomes counted as live payments.
		{name: "live_daraja_without_base_url_refused_for_serve", env: liveDarajaEnv(),
			args: []string{"serve"}, variable: "PAYSVC_DARAJA_BASE_URL"},
		{name: "live_daraja_on_the_sandbox_refused_for_serve", env: append(liveDarajaEnv(), "PAYSVC_DARAJA_BASE_URL", "https://sandbox.safaricom.co.ke"),
			args: []string{"serve"}, variable: "PAYSVC_DARAJA_BASE_URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := storagetest.New(t)
			r := runCLI(t, envFor(s, tc.env...), tc.args...)
			wantFailure(t, r, tc.variable)
			for i := 0; i+1 < len(tc.env); i += 2 {
				if tc.env[i] == "PAYSVC_DARAJA_CALLBACK_TOKEN" && strings.Contains(r.err.Error()+r.stderr, tc.env[i+1]) {
					t.Errorf("the refusal prints the token: %v", r)
				}
			}
			for _, table := range []string{"merchants", "api_keys", "wallets"} {
				if n := count(t, s.DB, `SELECT count(*) FROM `+table); n != 0 {
					t.Errorf("%d rows written to %s under a bad configuration", n, table)
				}
			}
		})
	}
}

// liveDarajaEnv is a live serve's environment with Daraja credentials and
// nothing else missing (the Kafka address is never reached: the start is refused first).
func liveDarajaEnv() []string {
	return []string{"PAYSVC_ENVIRONMENT", "live", "PAYSVC_KAFKA_BROKERS", "127.0.0.1:1", "PAYSVC_SMTP_URL", "smtp://127.0.0.1:1",
		"PAYSVC_DARAJA_CONSUMER_KEY", "ck", "PAYSVC_DARAJA_CONSUMER_SECRET", "cs", "PAYSVC_DARAJA_CALLBACK_BASE_URL", "https://pay.example.com",
		"PAYSVC_DARAJA_CALLBACK_TOKEN", "0123456789abcdef0123456789abcdef", "PAYSVC_HTTP_ADDR", "127.0.0.1:0", "PAYSVC_ADMIN_ADDR", "off"}
}

// The merchant's operational address: set at creation or later, cleared with "",
// refused when it is not an address (and then nothing changes).
func TestMerchantEmail(t *testing.T) {
	t.Parallel()
	s := storagetest.New(t)
	stored := func(id string) string {
		t.Helper()
		email, err := storage.MerchantEmail(t.Context(), s.DB, id)
		if err != nil {
			t.Fatal(err)
		}
		return email
	}
	m := createMerchant(t, s, "--email", "ops@acme.example")
	if got := stored(m.MerchantID); got != "ops@acme.example" {
		t.Fatalf("after create --email: %q", got)
	}
	if r := runCLI(t, envFor(s), "merchant", "email", m.MerchantID, "payments@acme.example"); r.err != nil {
		t.Fatalf("merchant email: %v", r)
	}
	if got := stored(m.MerchantID); got != "payments@acme.example" {
		t.Fatalf("after merchant email: %q", got)
	}
	wantUsage(t, runCLI(t, envFor(s), "merchant", "email", m.MerchantID, "not an address"))
	wantUsage(t, runCLI(t, envFor(s), "merchant", "create", "--name", "Bad", "--email", "nobody"))
	if got := stored(m.MerchantID); got != "payments@acme.example" {
		t.Fatalf("a refused address changed the stored one: %q", got)
	}
	wantFailure(t, runCLI(t, envFor(s), "merchant", "email", "MERNOSUCH01", "a@b.example"), "not found")
	if r := runCLI(t, envFor(s), "merchant", "email", m.MerchantID, ""); r.err != nil {
		t.Fatalf("clear: %v", r)
	}
	if got := stored(m.MerchantID); got != "" {
		t.Fatalf("after clearing: %q", got)
	}
}
