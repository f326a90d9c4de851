package ids_test

import (
	"regexp"
	"strings"
	"testing"

	"paysvc/actors/values/ids"
)

const alphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"

func inAlphabet(t *testing.T, s string) {
	t.Helper()
	for _, r := range s {
		if !strings.ContainsRune(alphabet, r) {
			t.Fatalf("%q has %q outside the alias alphabet", s, r)
		}
	}
}

var (
	uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	uuidV5 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

func TestAlias(t *testing.T) {
	t.Parallel()

	t.Run("LengthAndAlphabet", func(t *testing.T) {
		t.Parallel()
		for _, n := range []int{0, 1, 9, 10, 12, 64} {
			a := ids.Alias(n)
			if len(a) != n {
				t.Fatalf("Alias(%d) has length %d", n, len(a))
			}
			inAlphabet(t, a)
		}
	})

	t.Run("NoAmbiguousCharacters", func(t *testing.T) {
		t.Parallel()
		s := ids.Alias(4096)
		if strings.ContainsAny(s, "01IOabcdefghijklmnopqrstuvwxyz") {
			t.Fatalf("alias contains an ambiguous or lower-case character")
		}
	})

	t.Run("RandomUsesWholeAlphabet", func(t *testing.T) {
		t.Parallel()
		s := ids.Alias(4096)
		for _, r := range alphabet {
			if !strings.ContainsRune(s, r) {
				t.Fatalf("4096 random characters never used %q", r)
			}
		}
	})

	t.Run("Unique", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for i := 0; i < 10000; i++ {
			a := ids.Alias(10)
			if seen[a] {
				t.Fatalf("Alias(10) repeated %q", a)
			}
			seen[a] = true
		}
	})
}

func TestDerive(t *testing.T) {
	t.Parallel()

	t.Run("Deterministic", func(t *testing.T) {
		t.Parallel()
		a, b := ids.Derive(10, "cmd-1", "txn"), ids.Derive(10, "cmd-1", "txn")
		if a != b {
			t.Fatalf("Derive not deterministic: %q vs %q", a, b)
		}
		if len(a) != 10 {
			t.Fatalf("length %d", len(a))
		}
		inAlphabet(t, a)
	})

	t.Run("DifferentSeedsDiffer", func(t *testing.T) {
		t.Parallel()
		seen := map[string]string{}
		for _, parts := range [][]string{{"cmd-1", "txn"}, {"cmd-2", "txn"}, {"cmd-1", "fee"}, {"cmd-1txn"}, {"cmd-1", "tx", "n"}} {
			d := ids.Derive(10, parts...)
			key := strings.Join(parts, "|")
			if prev, dup := seen[d]; dup {
				t.Fatalf("Derive(%q) == Derive(%q) == %q", key, prev, d)
			}
			seen[d] = key
		}
	})

	t.Run("LongerThanHash", func(t *testing.T) {
		t.Parallel()
		d := ids.Derive(40, "x")
		if len(d) != 40 {
			t.Fatalf("length %d", len(d))
		}
		inAlphabet(t, d)
		if ids.Derive(40, "x")[:10] != ids.Derive(10, "x") {
			t.Fatal("a longer derived id does not extend the shorter one")
		}
	})
}

func TestUUID(t *testing.T) {
	t.Parallel()

	t.Run("Version4Format", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for i := 0; i < 1000; i++ {
			u := ids.UUID()
			if !uuidV4.MatchString(u) {
				t.Fatalf("UUID() = %q, not an RFC 4122 v4 UUID", u)
			}
			if seen[u] {
				t.Fatalf("UUID repeated %q", u)
			}
			seen[u] = true
		}
	})

	t.Run("DeriveUUID_DeterministicVersion5", func(t *testing.T) {
		t.Parallel()
		a, b := ids.DeriveUUID("merchant", "idem-key"), ids.DeriveUUID("merchant", "idem-key")
		if a != b {
			t.Fatalf("DeriveUUID not deterministic: %q vs %q", a, b)
		}
		if !uuidV5.MatchString(a) {
			t.Fatalf("DeriveUUID = %q, not a version-5-style UUID", a)
		}
	})

	// Command ids derived from Idempotency-Keys are stored: a retry after a deploy
	// must derive the same id, so the text of a derived UUID may never change.
	t.Run("DeriveUUID_StableAcrossVersions", func(t *testing.T) {
		t.Parallel()
		if got, want := ids.DeriveUUID("merchant", "idem-key"), "d3658d46-c95c-574c-b98f-c7cd49dc9092"; got != want {
			t.Fatalf("DeriveUUID(merchant, idem-key) = %q, want %q (sha256 of the joined parts, RFC 4122 layout)", got, want)
		}
	})

	t.Run("DeriveUUID_DistinctSeeds", func(t *testing.T) {
		t.Parallel()
		seen := map[string]string{}
		for _, parts := range [][]string{{"m1", "k1"}, {"m1", "k2"}, {"m2", "k1"}, {"m1k1"}, {"m1", "k1", ""}} {
			u := ids.DeriveUUID(parts...)
			key := strings.Join(parts, "|")
			if prev, dup := seen[u]; dup {
				t.Fatalf("DeriveUUID(%q) == DeriveUUID(%q)", key, prev)
			}
			seen[u] = key
		}
	})
}

func TestSecret(t *testing.T) {
	t.Parallel()
	s := ids.Secret()
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(s) {
		t.Fatalf("Secret() = %q, want 64 lower-case hex characters", s)
	}
	if s == ids.Secret() {
		t.Fatal("Secret repeated")
	}
}
