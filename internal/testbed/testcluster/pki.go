package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newKeyPair(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testcluster: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("testcluster: serial: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(48 * time.Hour)
	signer, signCert := key, tmpl
	if parent != nil {
		signer, signCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signCert, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("testcluster: sign %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testcluster: parse: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testcluster: marshal key: %w", err)
	}
	return &keyPair{cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}, nil
}

type pki struct {
	ca, serving, admin, sa *keyPair
	saPubPEM               []byte
}

// newPKI makes a throwaway CA per cluster so no two clusters (or runs) trust each other.
func newPKI() (*pki, error) {
	ca, err := newKeyPair(&x509.Certificate{Subject: pkix.Name{CommonName: "ql3-test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil)
	if err != nil {
		return nil, err
	}
	serving, err := newKeyPair(&x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca)
	if err != nil {
		return nil, err
	}
	admin, err := newKeyPair(&x509.Certificate{Subject: pkix.Name{CommonName: "ql3-admin", Organization: []string{"system:masters"}},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca)
	if err != nil {
		return nil, err
	}
	sa, err := newKeyPair(&x509.Certificate{Subject: pkix.Name{CommonName: "service-accounts"}}, ca)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("testcluster: marshal sa key: %w", err)
	}
	return &pki{ca: ca, serving: serving, admin: admin, sa: sa,
		saPubPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})}, nil
}
