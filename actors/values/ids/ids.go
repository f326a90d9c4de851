// Package ids makes the public identifiers of paysvc: short upper-case alias ids
// (wallets, merchants, transactions) and UUIDs (commands, events). Random ids come
// from crypto/rand; derived ids are hashes of their seed, so a command applied
// again after a redelivery produces the same transaction ids.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// alphabet avoids 0/O and 1/I so ids survive being read aloud or typed.
const alphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"

// Alias returns n random characters of the alias alphabet (5 bits each).
func Alias(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("ids: crypto/rand failed: %v", err)) // the OS has no entropy: nothing is safe
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Derive returns an n-character alias determined by the seed parts.
func Derive(n int, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	out := make([]byte, n)
	for i := range out {
		out[i] = alphabet[int(sum[i%len(sum)])%len(alphabet)]
	}
	return string(out)
}

// UUID returns a random RFC 4122 version 4 UUID.
func UUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("ids: crypto/rand failed: %v", err))
	}
	return formatUUID(b, 4)
}

// DeriveUUID returns a version-5-style UUID (SHA-256 based) determined by the seed
// parts: the command id of an Idempotency-Key request, for example.
func DeriveUUID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	var b [16]byte
	copy(b[:], sum[:16])
	return formatUUID(b, 5)
}

func formatUUID(b [16]byte, version byte) string {
	b[6] = (b[6] & 0x0f) | version<<4
	b[8] = (b[8] & 0x3f) | 0x80
	// One buffer, one allocation: this runs twice per API write (request id and
	// command id), and the concatenation of five slices cost five (docs/benchmarks-history.md).
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}

// Secret returns 32 random bytes (256 bits) as lower-case hex, for API keys.
func Secret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("ids: crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b[:])
}
