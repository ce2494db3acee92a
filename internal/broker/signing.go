package broker

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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	snswire "github.com/sluicemq/sluice/internal/sns/wire"
	"github.com/sluicemq/sluice/internal/vfs"
)

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

// signingFile is the key and certificate's file in the data directory.
const signingFile = "sns-signing.pem"

// certName matches the path of a signing certificate.
var certName = regexp.MustCompile(`^/SimpleNotificationService-[0-9a-f]{32}\.pem$`)

// signer is a broker's signing key and certificate, loaded or made on
// first use.
type signer struct {
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

func newSigner(cfg Config) *signer {
	s := &signer{dir: cfg.Dir, base: snsBase(cfg), rand: rand.Reader}
	if !cfg.InMemory {
		s.fs = cfg.FS
		if s.fs == nil {
			s.fs = vfs.OS{}
		}
	}
	return s
}

// snsBase is where envelopes send subscribers (SigningCertURL,
// UnsubscribeURL): Config.BaseURL, or SNS's endpoint in the region.
func snsBase(cfg Config) string {
	if cfg.BaseURL != "" {
		return strings.TrimRight(cfg.BaseURL, "/")
	}
	return "https://sns." + cfg.Region + ".amazonaws.com"
}

// Sign implements snswire.Signer.
func (s *signer) Sign(version, canonical string) (string, string, error) {
	if err := s.load(); err != nil {
		return "", "", err
	}
	return s.rsa.Sign(version, canonical)
}

// certificate returns the certificate served at path p, if it is this
// signer's (made already).
func (s *signer) certificate(p string) ([]byte, bool) {
	if !certName.MatchString(p) || !s.exists() {
		return nil, false
	}
	if err := s.load(); err != nil || p != s.name {
		return nil, false
	}
	return s.certPEM, true
}

// exists reports whether the key was made: loaded, or kept in the data
// directory (a request for a certificate never makes one).
func (s *signer) exists() bool {
	if s.loaded.Load() {
		return true
	}
	if s.fs == nil {
		return false
	}
	_, err := s.fs.Stat(path.Join(s.dir, signingFile))
	return err == nil
}

func (s *signer) load() error {
	s.once.Do(func() {
		s.err = s.loadOrMake()
		s.loaded.Store(s.err == nil)
	})
	return s.err
}

func (s *signer) loadOrMake() error {
	var data []byte
	if s.fs != nil {
		var err error
		if data, err = readFile(s.fs, path.Join(s.dir, signingFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sluice: reading the SNS signing key: %w", err)
		}
	}
	if data == nil {
		var err error
		if data, err = makeSigningPEM(s.rand); err != nil {
			return err
		}
		if s.fs != nil {
			if err := writeFileDurably(s.fs, s.dir, signingFile, data); err != nil {
				return fmt.Errorf("sluice: keeping the SNS signing key: %w", err)
			}
		}
	}
	key, certDER, err := parseSigningPEM(data)
	if err != nil {
		return fmt.Errorf("sluice: %s: %w", path.Join(s.dir, signingFile), err)
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

func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFileDurably writes dir/name whole or not at all (a temporary file,
// synced, renamed, the directory synced), readable by its owner only.
func writeFileDurably(fs vfs.FS, dir, name string, data []byte) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path.Join(dir, name+".tmp")
	f, err := fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path.Join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}
