// Package signkey keeps the key that signs SNS envelopes, and its
// certificate.
//
// SNS signs the envelopes it writes into queues for standard topics
// (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA), so that a
// subscriber can check a message came from the topic: the signature
// verifies with the certificate at the envelope's SigningCertURL. Sluice
// signs with a key of its own, made at the first signed delivery and kept
// in the data directory (sns-signing.pem, private: 0600) so that messages
// signed before a restart still verify after it; each node of a cluster
// has its own. The certificate is served on the SQS port at
// /SimpleNotificationService-<32 hex>.pem (by every node of a cluster).
// A broker in memory keeps its key in memory.
package signkey

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	snswire "github.com/sluicemq/sluice/internal/sns/wire"
	"github.com/sluicemq/sluice/internal/vfs"
)

// File is the key and certificate's file in the data directory.
const File = "sns-signing.pem"

// certName matches the path of a signing certificate.
var certName = regexp.MustCompile(`^/SimpleNotificationService-[0-9a-f]{32}\.pem$`)

// Key is a broker's signing key and certificate, loaded or made on first
// use.
type Key struct {
	fs   vfs.FS // nil: in memory only
	dir  string
	base string // the SigningCertURL's base, without the trailing slash
	rand io.Reader

	once    sync.Once
	loaded  atomic.Bool // the key is made or read
	err     error
	rsa     *snswire.RSASigner
	name    string // "/SimpleNotificationService-<hex>.pem"
	certPEM []byte
}

// IsCertificatePath reports whether p is the path of a signing
// certificate (/SimpleNotificationService-<32 hex>.pem), whoever's.
func IsCertificatePath(p string) bool { return certName.MatchString(p) }

// New is the signing key kept in dir on fs (nil: in memory only), its
// certificate served under base (the SigningCertURL's, without a trailing
// slash); random makes it.
func New(fs vfs.FS, dir, base string, random io.Reader) *Key {
	return &Key{fs: fs, dir: dir, base: base, rand: random}
}

// Sign implements snswire.Signer.
func (s *Key) Sign(version, canonical string) (string, string, error) {
	if err := s.load(); err != nil {
		return "", "", err
	}
	return s.rsa.Sign(version, canonical)
}

// Certificate returns the certificate served at path p, if it is this
// key's (made already).
func (s *Key) Certificate(p string) ([]byte, bool) {
	if !certName.MatchString(p) || !s.Exists() {
		return nil, false
	}
	if err := s.load(); err != nil || p != s.name {
		return nil, false
	}
	return s.certPEM, true
}

// Exists reports whether the key was made: loaded, or kept in the data
// directory (a request for a certificate never makes one).
func (s *Key) Exists() bool {
	if s.loaded.Load() {
		return true
	}
	if s.fs == nil {
		return false
	}
	_, err := s.fs.Stat(path.Join(s.dir, File))
	return err == nil
}

func (s *Key) load() error {
	s.once.Do(func() {
		s.err = s.loadOrMake()
		s.loaded.Store(s.err == nil)
	})
	return s.err
}

func (s *Key) loadOrMake() error {
	var data []byte
	if s.fs != nil {
		var err error
		if data, err = vfs.ReadFile(s.fs, path.Join(s.dir, File)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sluice: reading the SNS signing key: %w", err)
		}
	}
	if data == nil {
		var err error
		if data, err = makeSigningPEM(s.rand); err != nil {
			return err
		}
		if s.fs != nil {
			if err := vfs.WriteFileDurably(s.fs, s.dir, File, data); err != nil {
				return fmt.Errorf("sluice: keeping the SNS signing key: %w", err)
			}
		}
	}
	key, certDER, err := parseSigningPEM(data)
	if err != nil {
		return fmt.Errorf("sluice: %s: %w", path.Join(s.dir, File), err)
	}
	sum := sha256.Sum256(certDER)
	s.name = "/SimpleNotificationService-" + hex.EncodeToString(sum[:16]) + ".pem"
	s.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	s.rsa = snswire.NewRSASigner(key, s.base+s.name)
	return nil
}

// makeSigningPEM makes an RSA key and a self-signed certificate for it.
func makeSigningPEM(random io.Reader) ([]byte, error) {
	key, err := rsa.GenerateKey(random, 2048)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(random, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "Sluice SNS message signing", Organization: []string{"Sluice"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(20, 0, 0), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(random, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	return b.Bytes(), nil
}

func parseSigningPEM(data []byte) (*rsa.PrivateKey, []byte, error) {
	var key *rsa.PrivateKey
	var cert []byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "RSA PRIVATE KEY":
			k, err := x509.ParsePKCS1PrivateKey(b.Bytes)
			if err != nil {
				return nil, nil, err
			}
			key = k
		case "CERTIFICATE":
			cert = b.Bytes
		}
	}
	if key == nil || cert == nil {
		return nil, nil, errors.New("no RSA private key and certificate in it")
	}
	c, err := x509.ParseCertificate(cert)
	if err != nil {
		return nil, nil, err
	}
	if pub, ok := c.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, errors.New("its certificate is not its key's")
	}
	return key, cert, nil
}
