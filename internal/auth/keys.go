// Package auth makes and checks API keys. Secrets are shown once and stored
// only as their sha256 hash; a key belongs to exactly one tenant.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// SecretPrefix starts every key secret so people and scanners recognise it.
const SecretPrefix = "ak_"

// PrefixLen is how much of a secret is kept in clear to tell keys apart.
const PrefixLen = 10

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewSecret returns a fresh key secret with 256 bits of randomness.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return SecretPrefix + strings.ToLower(b32.EncodeToString(b[:]))
}

// Hash is the stored form of a secret: hex sha256. The secret has full
// entropy, so a fast hash is enough (no password stretching needed).
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Prefix returns the displayable head of a secret.
func Prefix(secret string) string {
	if len(secret) <= PrefixLen {
		return secret
	}
	return secret[:PrefixLen]
}
