package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of files the control plane's TLS and service accounts rest on.
// Every file lives under one folder so that a kept Dir restarts with the same
// identities and an existing kubeconfig stays valid.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) caCert() string            { return p.path("ca.crt") }
func (p pki) caKey() string             { return p.path("ca.key") }
func (p pki) servingCert() string       { return p.path("apiserver.crt") }
func (p pki) servingKey() string        { return p.path("apiserver.key") }
func (p pki) adminCert() string         { return p.path("admin.crt") }
func (p pki) adminKey() string          { return p.path("admin.key") }
func (p pki) kubeletClientCert() string { return p.path("apiserver-kubelet-client.crt") }
func (p pki) kubeletClientKey() string  { return p.path("apiserver-kubelet-client.key") }
func (p pki) serviceAccountKey() string { return p.path("sa.key") }
func (p pki) serviceAccountPub() string { return p.path("sa.pub") }

// certValidity is long enough for a local cluster kept for months, short
// enough that a forgotten one does not hold a credential forever.
const certValidity = 2 * 365 * 24 * time.Hour

// ensure creates whatever files are missing. Files already there are kept:
// a warm start reuses them.
func (p pki) ensure(serviceIP net.IP) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if exists(p.caCert()) && exists(p.caKey()) && exists(p.servingCert()) &&
		exists(p.adminCert()) && exists(p.serviceAccountKey()) {
		if exists(p.kubeletClientCert()) {
			return nil
		}
		// A folder from before the API server talked to kubelets.
		ca, caKey, err := p.loadCA()
		if err != nil {
			return err
		}
		return p.issue(p.kubeletClientCert(), p.kubeletClientKey(), kubeletClientTemplate(time.Now()), ca, caKey)
	}
	caKey, err := newKey()
	if err != nil {
		return err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "knit-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		return fmt.Errorf("pki: ca: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("pki: ca: %w", err)
	}
	if err := writeCert(p.caCert(), caDER); err != nil {
		return err
	}
	if err := writeKey(p.caKey(), caKey); err != nil {
		return err
	}

	serving := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, serviceIP},
	}
	if err := p.issue(p.servingCert(), p.servingKey(), serving, ca, caKey); err != nil {
		return err
	}
	// system:masters is bound to cluster-admin by the API server's bootstrap
	// RBAC policy, which is what a local admin credential should be.
	admin := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "knit-admin", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := p.issue(p.adminCert(), p.adminKey(), admin, ca, caKey); err != nil {
		return err
	}
	if err := p.issue(p.kubeletClientCert(), p.kubeletClientKey(), kubeletClientTemplate(now), ca, caKey); err != nil {
		return err
	}

	saKey, err := newKey()
	if err != nil {
		return err
	}
	if err := writeKey(p.serviceAccountKey(), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fmt.Errorf("pki: service account key: %w", err)
	}
	return writePEM(p.serviceAccountPub(), "PUBLIC KEY", pub, 0o644)
}

// kubeletClientTemplate is the API server's client certificate towards
// kubelets (--kubelet-client-certificate), as kubeadm makes it: a kubelet
// verifies it against the cluster CA and authorizes its user, whom
// system:masters lets use every node's kubelet API.
func kubeletClientTemplate(now time.Time) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// kubeletServing issues a serving certificate for the kubelet API of node
// at ip, signed by the cluster CA, named as a kubelet's serving certificate
// from the kubernetes.io/kubelet-serving signer is (system:node:<name> in
// system:nodes, the node's name and address as subject alternative names).
// The API server checks it against the CA (--kubelet-certificate-authority)
// and the address it dials.
func (p pki) kubeletServing(node string, ip net.IP) (tls.Certificate, error) {
	ca, caKey, err := p.loadCA()
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := newKey()
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{node},
		IPAddresses:  []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: kubelet serving certificate for %s: %w", node, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// loadCA reads the cluster CA and its key.
func (p pki) loadCA() (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(p.caCert())
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	keyPEM, err := os.ReadFile(p.caKey())
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: ca: %w", err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("pki: ca: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("pki: ca key cannot sign")
	}
	return ca, signer, nil
}

// caPool is a pool holding the cluster CA.
func (p pki) caPool() (*x509.CertPool, error) {
	data, err := os.ReadFile(p.caCert())
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("pki: ca.crt holds no certificate")
	}
	return pool, nil
}

func (p pki) issue(certPath, keyPath string, template, ca *x509.Certificate, caKey crypto.Signer) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("pki: %s: %w", template.Subject.CommonName, err)
	}
	if err := writeCert(certPath, der); err != nil {
		return err
	}
	return writeKey(keyPath, key)
}

// ECDSA P-256 keys: the API server, etcd clients and service-account tokens
// all accept them, and they are generated in microseconds where RSA takes
// a noticeable part of a cold start.
func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: key: %w", err)
	}
	return key, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial is still a valid certificate.
		return big.NewInt(1)
	}
	return n
}

func writeCert(path string, der []byte) error {
	return writePEM(path, "CERTIFICATE", der, 0o644)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: %s: %w", filepath.Base(path), err)
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
