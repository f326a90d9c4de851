package edge

import "paysvc/actors/values/ids"

// Key prefixes; the environment part is "test" (sandbox) or "live".
const (
	PublicPrefix = "ISPubKey_"
	SecretPrefix = "ISSecretKey_"
)

// NewKey makes a key of a kind ("public" or "secret") for an environment: the
// prefix, the environment, 64 hex characters (256 bits). keyID is its non-secret
// start, which operators and the console show and revoke by. The key is shown
// once; only its SHA-256 is stored.
func NewKey(kind, env string) (key, keyID string) {
	prefix := SecretPrefix
	if kind == "public" {
		prefix = PublicPrefix
	}
	marker := EnvMarker(env)[1:]
	key = prefix + marker + ids.Secret()
	return key, key[:len(prefix)+len(marker)+12]
}

// EnvMarker is the environment's part of a key, between underscores.
func EnvMarker(env string) string {
	if env == "live" {
		return "_live_"
	}
	return "_test_"
}
