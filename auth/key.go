// Package auth gives every Seam node an identity and authenticates the
// connections between nodes.
//
// A node's identity is an Ed25519 key. Its public half is named by a
// fingerprint ("ed25519:" and the unpadded base64url SHA-256 of the 32
// public-key bytes). A trust file lists the fingerprints a node accepts,
// one per line, like SSH's authorized_keys. Connections are TLS 1.3 with a
// self-signed certificate for the key on both sides; each side checks the
// other's key against its own trust file, so there is no certificate
// authority to run and no name to get right. TLS 1.3 binds every session to
// fresh randomness from both sides, which is what makes a recorded session
// useless to replay.
package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// FingerprintPrefix starts every fingerprint; it names the key type, so a
// future key type can never be confused with this one.
const FingerprintPrefix = "ed25519:"

// fingerprintLen is the base64 part's length: 32 bytes, unpadded.
var fingerprintLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// Fingerprint names a public key: "ed25519:" + base64url(SHA-256(key)).
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return FingerprintPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// ParseFingerprint checks that s is a well-formed fingerprint and returns it.
func ParseFingerprint(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, FingerprintPrefix)
	if !ok {
		return "", fmt.Errorf("fingerprint %q does not start with %q", clip(s), FingerprintPrefix)
	}
	if len(rest) != fingerprintLen {
		return "", fmt.Errorf("fingerprint %q: %d characters after the prefix, want %d", clip(s), len(rest), fingerprintLen)
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(rest); err != nil {
		return "", fmt.Errorf("fingerprint %q is not unpadded base64url: %w", clip(s), err)
	}
	return s, nil
}

// clip shortens untrusted text quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// GenerateKey makes a new identity key from r (crypto/rand when nil).
func GenerateKey(r io.Reader) (ed25519.PrivateKey, error) {
	if r == nil {
		r = rand.Reader
	}
	_, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return nil, fmt.Errorf("generating an Ed25519 key: %w", err)
	}
	return priv, nil
}

const pemType = "PRIVATE KEY" // PKCS #8, as openssl writes it

// WriteKeyFile writes key to path as a PKCS #8 PEM file with mode 0600. It
// never overwrites: an existing file is an error, since replacing a node's
// key silently locks it out of every cluster that trusts the old one.
func WriteKeyFile(path string, key ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding the key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists; refusing to overwrite a key (remove it first if you mean to replace it)", path)
		}
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: pemType, Bytes: der}); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// maxKeyFile bounds what LoadKeyFile reads: a PEM Ed25519 key is 119 bytes.
const maxKeyFile = 64 << 10

// LoadKeyFile reads a key written by WriteKeyFile (or openssl genpkey
// -algorithm ed25519). Like ssh, it refuses a file that others may read.
func LoadKeyFile(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %04o: others may read it; run chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("key file %s is over %d bytes; not a key", path, maxKeyFile)
	}
	return ParseKey(data, path)
}

// ParseKey decodes a PEM PKCS #8 Ed25519 private key; name is for errors.
func ParseKey(data []byte, name string) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block (want a %q block from seam keygen)", name, pemType)
	}
	if block.Type != pemType {
		return nil, fmt.Errorf("%s: PEM block %q, want %q", name, block.Type, pemType)
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, fmt.Errorf("%s: %d bytes after the key", name, len(rest))
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T key; Seam keys are Ed25519 (seam keygen)", name, k)
	}
	return priv, nil
}

// Public returns the fingerprint of a private key's public half.
func Public(key ed25519.PrivateKey) string {
	return Fingerprint(key.Public().(ed25519.PublicKey))
}
