package storage_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

type merchantBundle struct {
	ctx context.Context
	db  *sqlx.DB
}

func keyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// setupMerchants stores merchants M1 and M2 and three secret keys: two of M1 whose
// ids share the prefix "ISSecretKey_test_aa", and one of M2.
func setupMerchants(t *testing.T) merchantBundle {
	t.Helper()
	b := merchantBundle{ctx: context.Background(), db: storagetest.New(t).DB}
	for _, m := range []string{"M1", "M2"} {
		if err := storage.InsertMerchant(b.ctx, b.db, storage.Merchant{MerchantID: m, Name: "name " + m, Environment: "sandbox", Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []struct{ id, merchant string }{
		{"ISSecretKey_test_aa11", "M1"},
		{"ISSecretKey_test_aa22", "M1"},
		{"ISSecretKey_test_bb33", "M2"},
	} {
		if err := storage.InsertAPIKey(b.ctx, b.db, storage.APIKey{KeyID: k.id, MerchantID: k.merchant, Kind: "secret",
			Environment: "sandbox", Permissions: pq.StringArray{"view_files"}}, keyHash(k.id+"-full-secret")); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestMerchants(t *testing.T) {
	t.Parallel()

	t.Run("InsertAndGetMerchant", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		m, err := storage.GetMerchant(b.ctx, b.db, "M1")
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != "name M1" || m.Environment != "sandbox" || !m.Enabled || m.CreatedAt.IsZero() {
			t.Fatalf("merchant %+v", m)
		}
		if _, err := storage.GetMerchant(b.ctx, b.db, "NOPE"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		if err := storage.InsertMerchant(b.ctx, b.db, storage.Merchant{MerchantID: "M1", Name: "dup", Environment: "sandbox"}); err == nil {
			t.Fatal("duplicate merchant id accepted")
		}
		if err := storage.InsertMerchant(b.ctx, b.db, storage.Merchant{MerchantID: "M9", Name: "x", Environment: "staging"}); err == nil {
			t.Fatal("unknown environment accepted")
		}
	})

	t.Run("KeyByHash_WithMerchantEnabled", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		k, err := storage.KeyByHash(b.ctx, b.db, keyHash("ISSecretKey_test_aa11-full-secret"))
		if err != nil {
			t.Fatal(err)
		}
		if k.KeyID != "ISSecretKey_test_aa11" || k.MerchantID != "M1" || k.Kind != "secret" || !k.MerchantEnabled ||
			k.RevokedAt != nil || len(k.Permissions) != 1 || k.Permissions[0] != "view_files" {
			t.Fatalf("key %+v", k)
		}
		ok, err := storage.SetMerchantEnabled(b.ctx, b.db, "M1", false)
		if err != nil || !ok {
			t.Fatalf("disable: %v %v", ok, err)
		}
		k, err = storage.KeyByHash(b.ctx, b.db, keyHash("ISSecretKey_test_aa11-full-secret"))
		if err != nil {
			t.Fatal(err)
		}
		if k.MerchantEnabled {
			t.Fatal("key of a disabled merchant reports MerchantEnabled")
		}
		if ok, err := storage.SetMerchantEnabled(b.ctx, b.db, "NOPE", false); err != nil || ok {
			t.Fatalf("disable unknown merchant: %v %v", ok, err)
		}
	})

	t.Run("KeyByHash_UnknownNotFound", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		if _, err := storage.KeyByHash(b.ctx, b.db, keyHash("ISSecretKey_test_aa11")); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound (the key id alone is not the key)", err)
		}
	})

	t.Run("InsertAPIKey_DuplicateHashRefused", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		err := storage.InsertAPIKey(b.ctx, b.db, storage.APIKey{KeyID: "other", MerchantID: "M2", Kind: "public", Environment: "sandbox",
			Permissions: pq.StringArray{}}, keyHash("ISSecretKey_test_aa11-full-secret"))
		if err == nil {
			t.Fatal("two keys with one hash accepted")
		}
	})

	t.Run("RevokeKey_AmbiguousPrefixRevokesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		if _, err := storage.RevokeKey(b.ctx, b.db, "ISSecretKey_test_aa"); err == nil || errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want an ambiguity error", err)
		}
		for _, id := range []string{"ISSecretKey_test_aa11", "ISSecretKey_test_aa22"} {
			k, err := storage.KeyByHash(b.ctx, b.db, keyHash(id+"-full-secret"))
			if err != nil || k.RevokedAt != nil {
				t.Fatalf("%s after an ambiguous revoke: %+v %v", id, k, err)
			}
		}
	})

	t.Run("RevokeKey_UnknownNotFound", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		if _, err := storage.RevokeKey(b.ctx, b.db, "ISSecretKey_test_zz"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("RevokeKey_UniquePrefix", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		wantRevoked(t, b, "ISSecretKey_test_aa2", "ISSecretKey_test_aa22")
		k, err := storage.KeyByHash(b.ctx, b.db, keyHash("ISSecretKey_test_aa22-full-secret"))
		if err != nil || k.RevokedAt == nil {
			t.Fatalf("revoked key %+v %v", k, err)
		}
		// Once aa22 is revoked, the former ambiguous prefix names only aa11.
		id, err := storage.RevokeKey(b.ctx, b.db, "ISSecretKey_test_aa")
		if err != nil || id != "ISSecretKey_test_aa11" {
			t.Fatalf("revoke by the now-unique prefix: %q %v", id, err)
		}
		if _, err := storage.RevokeKey(b.ctx, b.db, "ISSecretKey_test_aa22"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("revoking a revoked key: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("RevokeKey_FullKeyLongerThanKeyID", func(t *testing.T) {
		t.Parallel()
		b := setupMerchants(t)
		wantRevoked(t, b, "ISSecretKey_test_bb33-full-secret", "ISSecretKey_test_bb33")
		k, err := storage.KeyByHash(b.ctx, b.db, keyHash("ISSecretKey_test_aa11-full-secret"))
		if err != nil || k.RevokedAt != nil {
			t.Fatalf("another key was revoked too: %+v %v", k, err)
		}
	})
}

// wantRevoked revokes the key that prefix names and fails unless it was want.
func wantRevoked(t *testing.T, b merchantBundle, prefix, want string) {
	t.Helper()
	id, err := storage.RevokeKey(b.ctx, b.db, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if id != want {
		t.Fatalf("revoked %q", id)
	}
}
