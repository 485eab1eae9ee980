package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
)

// The key file holds the keys secrets are sealed with: several, each with
// an id, one current. New secrets are sealed with the current key; a
// sealed secret names its key, so older keys keep opening what they
// sealed until a rotation has re-encrypted it and the operator drops them.
//
//	{"current": "vkey_…", "keys": [{"id": "vkey_…", "key": "<base64 of 32 bytes>", "created_at": "…"}]}
//
// It is created 0600 on first start and refused when anyone but its owner
// (the daemon's user) may read or write it.
type keyFile struct {
	Current string    `json:"current"`
	Keys    []fileKey `json:"keys"`
}

type fileKey struct {
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"created_at"`
}

// keyLen is AES-256's key size.
const keyLen = 32

// Keyring seals and opens credential secrets with AES-256-GCM under the
// keys of one key file. It follows the file: sealing notices a file that
// changed (a rotation by `agentkernel vault rotate-key` while the daemon
// runs) and opening a secret under a key it does not hold re-reads the file
// once, so a running daemon needs no restart after a rotation.
type Keyring struct {
	path string

	mu      sync.Mutex
	keys    map[string]cipher.AEAD
	current string
	stamp   fileStamp
	file    keyFile
}

// fileStamp tells whether the file changed since it was read.
type fileStamp struct {
	ino   uint64
	size  int64
	mtime time.Time
}

// OpenKeyring reads the key file at path, creating it (0600, one key) when
// it does not exist.
func OpenKeyring(path string) (*Keyring, error) {
	k := &Keyring{path: path}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createKeyFile(path); err != nil {
			return nil, err
		}
	}
	if err := k.load(); err != nil {
		return nil, err
	}
	return k, nil
}

// Path is the key file.
func (k *Keyring) Path() string { return k.path }

func createKeyFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("vault key file %s: %w", path, err)
	}
	kf := keyFile{}
	id, err := addKey(&kf)
	if err != nil {
		return err
	}
	kf.Current = id
	b, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return err
	}
	// O_EXCL: two first starts never both write a different first key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create vault key file %s: %w", path, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write vault key file %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync vault key file %s: %w", path, err)
	}
	return f.Close()
}

func addKey(kf *keyFile) (string, error) {
	raw := make([]byte, keyLen)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("vault: generate a key: %w", err)
	}
	id := ids.New("vkey")
	kf.Keys = append(kf.Keys, fileKey{ID: id, Key: base64.StdEncoding.EncodeToString(raw), CreatedAt: time.Now().UTC()})
	return id, nil
}

// checkKeyFile refuses a key file others may read or write, or that
// belongs to another user: the keys open every secret in the store.
func checkKeyFile(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("vault key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("vault key file %s has mode %04o: it must be readable and writable by its owner only (chmod 600 %s)", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("vault key file %s is owned by uid %d, not by uid %d that runs agentkernel (chown it, or name another file in [vault] key_file)", path, st.Uid, os.Geteuid())
	}
	return nil
}

func stampOf(fi fs.FileInfo) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s
}

// load reads the file (the caller holds mu, or k is not shared yet).
func (k *Keyring) load() error {
	f, err := os.Open(k.path)
	if err != nil {
		return fmt.Errorf("open vault key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("vault key file %s: %w", k.path, err)
	}
	if err := checkKeyFile(k.path, fi); err != nil {
		return err
	}
	var kf keyFile
	if err := json.NewDecoder(f).Decode(&kf); err != nil {
		return fmt.Errorf("vault key file %s is not a key file: %v", k.path, err)
	}
	keys := make(map[string]cipher.AEAD, len(kf.Keys))
	for i, fk := range kf.Keys {
		raw, err := base64.StdEncoding.DecodeString(fk.Key)
		if err != nil || len(raw) != keyLen || fk.ID == "" {
			return fmt.Errorf("vault key file %s: key %d (%q) is not an id with a base64 %d-byte key", k.path, i, fk.ID, keyLen)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return err
		}
		keys[fk.ID] = aead
	}
	if keys[kf.Current] == nil {
		return fmt.Errorf("vault key file %s: current key %q is not among its keys", k.path, kf.Current)
	}
	k.keys, k.current, k.stamp, k.file = keys, kf.Current, stampOf(fi), kf
	return nil
}

// refresh re-reads the file if it changed since it was read.
func (k *Keyring) refresh() error {
	fi, err := os.Stat(k.path)
	if err != nil {
		return fmt.Errorf("vault key file: %w", err)
	}
	if stampOf(fi) == k.stamp {
		return nil
	}
	return k.load()
}

// Current is the id of the key new secrets are sealed with.
func (k *Keyring) Current() (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.refresh(); err != nil {
		return "", err
	}
	return k.current, nil
}

// KeyIDs are the ids of every key in the file, in file order.
func (k *Keyring) KeyIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.file.Keys))
	for _, fk := range k.file.Keys {
		out = append(out, fk.ID)
	}
	return out
}

// aad binds a sealed secret to its row: a ciphertext copied onto another
// credential, or another tenant's, does not open.
func aad(tenantID, credentialID string) []byte {
	return []byte("agentkernel vault v1\x00" + tenantID + "\x00" + credentialID)
}

// Seal encrypts plaintext for the credential under the current key and
// returns the ciphertext (nonce first) and the key's id.
func (k *Keyring) Seal(tenantID, credentialID string, plaintext []byte) ([]byte, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.refresh(); err != nil {
		return nil, "", err
	}
	aead := k.keys[k.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, "", fmt.Errorf("vault: nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plaintext, aad(tenantID, credentialID)), k.current, nil
}

// Open decrypts a secret sealed by Seal. A key id the keyring does not
// hold makes it re-read the file once (a rotation may have added it).
func (k *Keyring) Open(tenantID, credentialID, keyID string, sealed []byte) ([]byte, error) {
	k.mu.Lock()
	aead := k.keys[keyID]
	if aead == nil {
		if err := k.load(); err != nil {
			k.mu.Unlock()
			return nil, err
		}
		aead = k.keys[keyID]
	}
	k.mu.Unlock()
	if aead == nil {
		return nil, fmt.Errorf("credential %s is sealed with key %s, which %s does not hold (was it dropped before every credential was re-encrypted?)", credentialID, keyID, k.path)
	}
	if len(sealed) < aead.NonceSize() {
		return nil, fmt.Errorf("credential %s: sealed secret is truncated", credentialID)
	}
	out, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], aad(tenantID, credentialID))
	if err != nil {
		return nil, fmt.Errorf("credential %s: sealed secret does not open with key %s (tampered with, or copied from another row)", credentialID, keyID)
	}
	return out, nil
}

// AddKey adds a new key to the file and makes it current; the old keys
// stay and keep opening what they sealed.
func (k *Keyring) AddKey() (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.load(); err != nil {
		return "", err
	}
	kf := k.file
	kf.Keys = append([]fileKey(nil), kf.Keys...)
	id, err := addKey(&kf)
	if err != nil {
		return "", err
	}
	kf.Current = id
	if err := k.write(kf); err != nil {
		return "", err
	}
	return id, k.load()
}

// DropOld removes every key but the current one from the file and returns
// their ids. The caller must have checked that nothing is sealed with them.
func (k *Keyring) DropOld() ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.load(); err != nil {
		return nil, err
	}
	var dropped []string
	kf := keyFile{Current: k.file.Current}
	for _, fk := range k.file.Keys {
		if fk.ID == kf.Current {
			kf.Keys = append(kf.Keys, fk)
		} else {
			dropped = append(dropped, fk.ID)
		}
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	if err := k.write(kf); err != nil {
		return nil, err
	}
	return dropped, k.load()
}

// write replaces the file atomically (a temp file 0600 beside it, synced,
// renamed over it): a reader sees the old file or the new one, never half.
func (k *Keyring) write(kf keyFile) error {
	b, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(k.path), ".vault.keys-*")
	if err != nil {
		return fmt.Errorf("vault key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write vault key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), k.path); err != nil {
		return fmt.Errorf("replace vault key file %s: %w", k.path, err)
	}
	if d, err := os.Open(filepath.Dir(k.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
