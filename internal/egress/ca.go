package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// The files of a CA directory. The certificate goes into every egress
// sandbox's trust store; the key never leaves the daemon's host.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 24 * time.Hour
	// leafRenew: a cached leaf is replaced this long before it expires, so
	// a connection never gets a certificate that runs out mid-handshake.
	leafRenew = time.Hour
	// leafBackdate absorbs clock skew between the daemon and the sandbox.
	leafBackdate = 5 * time.Minute
	leafCacheMax = 1024
)

// CA is the daemon's egress certificate authority: it mints the leaf
// certificates the proxy presents to a sandbox for the hosts whose
// requests it rewrites (credential substitution needs the plaintext).
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey // one key for every leaf: in memory only
	leaves  *lru.Cache[string, *tls.Certificate]
	now     func() time.Time
}

// LoadOrCreateCA loads the CA in dir, creating it on first use. The key
// file is created 0600 with O_EXCL (two daemons starting at once do not
// overwrite each other's key) and refused when anyone else could read or
// replace it.
func LoadOrCreateCA(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	key, err := loadKey(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(keyPath)
		if errors.Is(err, fs.ErrExist) { // another process won the race
			key, err = loadKey(keyPath)
		}
	}
	if err != nil {
		return nil, err
	}
	certPath := filepath.Join(dir, CACertFile)
	cert, certPEM, err := loadCert(certPath, key)
	if errors.Is(err, fs.ErrNotExist) {
		cert, certPEM, err = createCert(certPath, key)
	}
	if err != nil {
		return nil, err
	}
	return newCA(cert, certPEM, key, time.Now)
}

func newCA(cert *x509.Certificate, certPEM []byte, key *ecdsa.PrivateKey, now func() time.Time) (*CA, error) {
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf key: %w", err)
	}
	leaves, err := lru.New[string, *tls.Certificate](leafCacheMax)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, certPEM: certPEM, key: key, leafKey: leafKey, leaves: leaves, now: now}, nil
}

// CertPEM is the CA certificate a sandbox trusts.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// Certificate is the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Leaf is a certificate for host (a name or an IP literal) signed by the
// CA, from the cache while it has more than leafRenew left.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	host = strings.ToLower(strings.Trim(host, "[]"))
	now := ca.now()
	if c, ok := ca.leaves.Get(host); ok && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	serial, err := randSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(leafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress CA: leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: leaf}
	ca.leaves.Add(host, c)
	return c, nil
}

func loadKey(path string) (*ecdsa.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("egress CA: %s is not a regular file; remove it and restart to create a new CA", path)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		return nil, fmt.Errorf("egress CA: %s has mode %04o, want 0600: others could read the CA key (chmod 600 %s)", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("egress CA: %s is owned by uid %d, not by this daemon (uid %d); chown it or remove it to create a new CA", path, st.Uid, os.Getuid())
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("egress CA: read %s: %w", path, err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("egress CA: %s holds no EC PRIVATE KEY block", path)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA: parse %s: %w", path, err)
	}
	return key, nil
}

func createKey(path string) (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress CA: generate key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := pem.Encode(f, &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("egress CA: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}

func loadCert(path string, key *ecdsa.PrivateKey) (*x509.Certificate, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("egress CA: %s holds no CERTIFICATE block; remove it to create a new one", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA: parse %s: %w", path, err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, fmt.Errorf("egress CA: %s does not belong to the key %s; remove it to create a new one", path, CAKeyFile)
	}
	return cert, pem.EncodeToMemory(block), nil
}

func createCert(path string, key *ecdsa.PrivateKey) (*x509.Certificate, []byte, error) {
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(spki)
	serial, err := randSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "agentkernel egress CA " + hex.EncodeToString(sum[:4]), Organization: []string{"agentkernel"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          sum[:20],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	// Written whole then renamed: a sandbox never sees half a certificate.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ca-*.pem")
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(certPEM); err != nil {
		tmp.Close()
		return nil, nil, fmt.Errorf("egress CA: write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return nil, nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, nil, fmt.Errorf("egress CA: %w", err)
	}
	return cert, certPEM, nil
}

func randSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
