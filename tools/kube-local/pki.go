package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki lays out the certificates of one data dir (D/pki). Everything is
// signed by one local CA; keys are ECDSA P-256.
type pki struct{ dir string }

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }
func (p pki) CACert() string          { return p.path("ca.crt") }
func (p pki) CAKey() string           { return p.path("ca.key") }
func (p pki) Cert(n string) string    { return p.path(n + ".crt") }
func (p pki) Key(n string) string     { return p.path(n + ".key") }
func (p pki) SAKey() string           { return p.path("sa.key") }
func (p pki) SAPub() string           { return p.path("sa.pub") }

type leafSpec struct {
	name   string
	cn     string
	orgs   []string
	server bool
	client bool
	dns    []string
	ips    []net.IP
}

func leafSpecs() []leafSpec {
	loopIPs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	return []leafSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: append([]net.IP{net.ParseIP("10.96.0.1")}, loopIPs...)},
		{name: "etcd-server", cn: "etcd", server: true, client: true, dns: []string{"localhost"}, ips: loopIPs},
		{name: "apiserver-etcd-client", cn: "kube-apiserver-etcd-client", client: true},
		{name: "admin", cn: "kube-local-admin", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
		{name: "serving", cn: "kube-local-serving", server: true, dns: []string{"localhost"}, ips: loopIPs},
		// pods/log, exec and port-forward: the apiserver dials the node's kubelet
		// with this client cert (kubeadm's identity) and checks the kubelet's
		// serving cert against the CA. Simulated kubelets serve kubelet-serving.
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{name: "kubelet-serving", cn: "kube-local-kubelet", server: true, dns: []string{"localhost"}, ips: loopIPs},
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// ensure creates whatever is missing; existing files are kept, so restarts
// on the same data dir reuse the same identities.
func (p pki) ensure() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	if !exists(p.CACert()) || !exists(p.CAKey()) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: "kube-local-ca", Organization: []string{"gpufleet kube-local"}},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return err
		}
		if err := writeKey(p.CAKey(), key); err != nil {
			return err
		}
		if err := writePEM(p.CACert(), "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
	}
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	for _, s := range leafSpecs() {
		if exists(p.Cert(s.name)) && exists(p.Key(s.name)) {
			continue
		}
		if err := p.issue(s, caCert, caKey); err != nil {
			return fmt.Errorf("issue %s: %w", s.name, err)
		}
	}
	if !exists(p.SAKey()) || !exists(p.SAPub()) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		pub, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			return err
		}
		if err := writeKey(p.SAKey(), key); err != nil {
			return err
		}
		if err := writePEM(p.SAPub(), "PUBLIC KEY", pub, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

func (p pki) loadCA() (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(p.CACert())
	if err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(cb)
	if blk == nil {
		return nil, nil, fmt.Errorf("%s: no PEM data", p.CACert())
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(p.CAKey())
	if err != nil {
		return nil, nil, err
	}
	kblk, _ := pem.Decode(kb)
	if kblk == nil {
		return nil, nil, fmt.Errorf("%s: no PEM data", p.CAKey())
	}
	key, err := x509.ParseECPrivateKey(kblk.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func (p pki) issue(s leafSpec, ca *x509.Certificate, caKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     s.dns,
		IPAddresses:  s.ips,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	if err := writeKey(p.Key(s.name), key); err != nil {
		return err
	}
	return writePEM(p.Cert(s.name), "CERTIFICATE", der, 0o644)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
