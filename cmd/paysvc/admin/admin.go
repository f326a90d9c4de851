// Package admin provisions merchants and their API keys. Keys are made here from
// 256 random bits, shown once to the caller and stored only as SHA-256 hashes; the
// non-secret key id (the key's first characters) is what operators use to revoke.
package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
)

// Created is what `paysvc merchant create` prints.
type Created struct {
	MerchantID string `json:"merchant_id"`
	PublicKey  string `json:"public_key"`
	SecretKey  string `json:"secret_key"`
}

// Key is a newly issued key, shown once.
type Key struct {
	KeyID       string   `json:"key_id"`
	Key         string   `json:"secret_key"`
	Permissions []string `json:"permissions"`
	// Unrestricted: the key may do everything (its permissions list is empty).
	Unrestricted bool `json:"unrestricted"`
}

// newKey makes a key of a kind (edge.NewKey: the console makes keys the same way).
func newKey(kind, env string) (key, keyID string) { return edge.NewKey(kind, env) }

func hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// CreateMerchant stores a merchant with a public key, a full secret key and its KES
// settlement wallet, in one transaction.
func CreateMerchant(ctx context.Context, db *sqlx.DB, name, env string) (Created, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		return Created{}, errors.New("--name is required (at most 200 characters)")
	}
	if env != "sandbox" && env != "live" {
		return Created{}, fmt.Errorf("environment must be sandbox or live, not %q", env)
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return Created{}, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	m := storage.Merchant{MerchantID: "MER" + ids.Alias(12), Name: name, Environment: env, Enabled: true}
	if err := storage.InsertMerchant(ctx, tx, m); err != nil {
		return Created{}, err
	}
	pub, pubID := newKey("public", env)
	sec, secID := newKey("secret", env)
	if err := storage.InsertAPIKey(ctx, tx, storage.APIKey{KeyID: pubID, MerchantID: m.MerchantID, Kind: "public",
		Environment: env, Permissions: pq.StringArray{}}, hash(pub)); err != nil {
		return Created{}, err
	}
	if err := storage.InsertAPIKey(ctx, tx, storage.APIKey{KeyID: secID, MerchantID: m.MerchantID, Kind: "secret",
		Environment: env, Permissions: pq.StringArray{}, Unrestricted: true}, hash(sec)); err != nil {
		return Created{}, err
	}
	now := time.Now().UTC()
	if err := walletstore.Insert(ctx, tx, wallet.State{
		WalletID: ids.Alias(12), MerchantID: m.MerchantID, Currency: "KES", WalletType: wallet.TypeSettlement,
		Label: "SETTLEMENT KES", CanDisburse: true, CurrentBalance: money.Zero(), AvailableBalance: money.Zero(), Version: 1,
		CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		return Created{}, err
	}
	if err := tx.Commit(); err != nil {
		return Created{}, err
	}
	return Created{MerchantID: m.MerchantID, PublicKey: pub, SecretKey: sec}, nil
}

// CreateKey issues a secret key restricted to the given permissions (at least
// one: a key with none could do nothing).
func CreateKey(ctx context.Context, db *sqlx.DB, merchantID string, perms []string) (Key, error) {
	if len(perms) == 0 {
		return Key{}, fmt.Errorf("--permissions: at least one of %s (or --unrestricted for a key that may do everything)", knownPermissions())
	}
	seen := map[string]bool{}
	unique := perms[:0:0]
	for _, p := range perms {
		if !edge.KnownPermission(p) {
			return Key{}, fmt.Errorf("--permissions: unknown permission %q (known: %s)", p, knownPermissions())
		}
		if !seen[p] {
			seen[p] = true
			unique = append(unique, p)
		}
	}
	perms = unique
	m, err := merchant(ctx, db, merchantID)
	if err != nil {
		return Key{}, err
	}
	return insertKey(ctx, db, m, perms, false)
}

// merchant reads the merchant a key is for; an unknown id is an error that names
// it, for the operator who typed it.
func merchant(ctx context.Context, db *sqlx.DB, merchantID string) (storage.Merchant, error) {
	m, err := storage.GetMerchant(ctx, db, merchantID)
	if errors.Is(err, storage.ErrNotFound) {
		return m, fmt.Errorf("merchant %q not found", merchantID)
	}
	return m, err
}

// CreateUnrestrictedKey issues another unrestricted secret key of the merchant,
// as the one made with it (to replace it: create, deploy, revoke the old one).
// It is asked for by name (--unrestricted), never the result of a missing list.
func CreateUnrestrictedKey(ctx context.Context, db *sqlx.DB, merchantID string) (Key, error) {
	m, err := merchant(ctx, db, merchantID)
	if err != nil {
		return Key{}, err
	}
	return insertKey(ctx, db, m, nil, true)
}

func insertKey(ctx context.Context, db *sqlx.DB, m storage.Merchant, perms []string, unrestricted bool) (Key, error) {
	sec, id := newKey("secret", m.Environment)
	if err := storage.InsertAPIKey(ctx, db, storage.APIKey{KeyID: id, MerchantID: m.MerchantID, Kind: "secret",
		Environment: m.Environment, Permissions: perms, Unrestricted: unrestricted}, hash(sec)); err != nil {
		return Key{}, err
	}
	if perms == nil {
		perms = []string{}
	}
	return Key{KeyID: id, Key: sec, Permissions: perms, Unrestricted: unrestricted}, nil
}

// knownPermissions lists the catalogue (edge.Permissions, docs/security.md) for messages.
func knownPermissions() string {
	names := make([]string, len(edge.Permissions))
	for i, p := range edge.Permissions {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
