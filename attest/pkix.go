package attest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/asn1"
	"errors"
	"fmt"
)

// The two key types ql3 signs with are parsed here with encoding/asn1 rather than crypto/x509:
// crypto/x509 imports package net (for addresses in certificates), and the offline auditor, which
// verifies attestations, must not be able to open a socket.

var (
	oidPublicKeyECDSA   = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}
	oidPublicKeyEd25519 = asn1.ObjectIdentifier{1, 3, 101, 112}
	oidPublicKeyRSA     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidCurveP256        = asn1.ObjectIdentifier{1, 2, 840, 10045, 3, 1, 7}
	curveNames          = map[string]string{"1.3.132.0.34": "P-384", "1.3.132.0.35": "P-521", "1.3.132.0.33": "P-224"}
)

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type subjectPublicKeyInfo struct {
	Algorithm algorithmIdentifier
	PublicKey asn1.BitString
}

type pkcs8Key struct {
	Version    int
	Algorithm  algorithmIdentifier
	PrivateKey []byte
	Attributes asn1.RawValue `asn1:"optional,tag:0"`
}

type ecPrivateKey struct {
	Version    int
	PrivateKey []byte
	Curve      asn1.ObjectIdentifier `asn1:"optional,explicit,tag:0"`
	PublicKey  asn1.BitString        `asn1:"optional,explicit,tag:1"`
}

// errKeyType carries the name of a key kind ql3 does not sign with.
type errKeyType struct{ kind string }

func (e errKeyType) Error() string { return e.kind }

func unmarshalAll(der []byte, v any) error {
	rest, err := asn1.Unmarshal(der, v)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errors.New("trailing data")
	}
	return nil
}

// curveOf checks an EC algorithm's parameters name P-256.
func curveOf(params asn1.RawValue) error {
	var oid asn1.ObjectIdentifier
	if err := unmarshalAll(params.FullBytes, &oid); err != nil {
		return err
	}
	if !oid.Equal(oidCurveP256) {
		name := curveNames[oid.String()]
		if name == "" {
			name = "curve " + oid.String()
		}
		return errKeyType{"ecdsa on " + name}
	}
	return nil
}

func algorithmKind(oid asn1.ObjectIdentifier) errKeyType {
	if oid.Equal(oidPublicKeyRSA) {
		return errKeyType{"rsa"}
	}
	return errKeyType{"algorithm " + oid.String()}
}

// parsePKIXPublicKey parses a SubjectPublicKeyInfo of an ECDSA P-256 or Ed25519 key.
func parsePKIXPublicKey(der []byte) (crypto.PublicKey, error) {
	var spki subjectPublicKeyInfo
	if err := unmarshalAll(der, &spki); err != nil {
		return nil, err
	}
	if spki.PublicKey.BitLength%8 != 0 {
		return nil, errors.New("public key bit string is not whole bytes")
	}
	switch a := spki.Algorithm; {
	case a.Algorithm.Equal(oidPublicKeyECDSA):
		if err := curveOf(a.Parameters); err != nil {
			return nil, err
		}
		return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), spki.PublicKey.Bytes)
	case a.Algorithm.Equal(oidPublicKeyEd25519):
		if len(a.Parameters.FullBytes) != 0 || len(spki.PublicKey.Bytes) != ed25519.PublicKeySize {
			return nil, errors.New("malformed ed25519 public key")
		}
		return ed25519.PublicKey(append([]byte(nil), spki.PublicKey.Bytes...)), nil
	default:
		return nil, algorithmKind(a.Algorithm)
	}
}

// marshalPKIXPublicKey is the DER SubjectPublicKeyInfo of an ECDSA P-256 or Ed25519 key, byte for
// byte what crypto/x509 writes (the key digest and hint are its SHA-256).
func marshalPKIXPublicKey(k crypto.PublicKey) ([]byte, error) {
	var spki subjectPublicKeyInfo
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		point, err := k.Bytes()
		if err != nil {
			return nil, err
		}
		params, err := asn1.Marshal(oidCurveP256)
		if err != nil {
			return nil, err
		}
		spki.Algorithm = algorithmIdentifier{Algorithm: oidPublicKeyECDSA, Parameters: asn1.RawValue{FullBytes: params}}
		spki.PublicKey = asn1.BitString{Bytes: point, BitLength: 8 * len(point)}
	case ed25519.PublicKey:
		spki.Algorithm = algorithmIdentifier{Algorithm: oidPublicKeyEd25519}
		spki.PublicKey = asn1.BitString{Bytes: k, BitLength: 8 * len(k)}
	default:
		return nil, fmt.Errorf("unsupported public key %T", k)
	}
	return asn1.Marshal(spki)
}

// parsePKCS8PrivateKey parses an unencrypted PKCS#8 ECDSA P-256 or Ed25519 private key.
func parsePKCS8PrivateKey(der []byte) (crypto.Signer, error) {
	var p pkcs8Key
	if err := unmarshalAll(der, &p); err != nil {
		return nil, err
	}
	defer clear(p.PrivateKey)
	switch a := p.Algorithm; {
	case a.Algorithm.Equal(oidPublicKeyECDSA):
		if err := curveOf(a.Parameters); err != nil {
			return nil, err
		}
		var ec ecPrivateKey
		if err := unmarshalAll(p.PrivateKey, &ec); err != nil {
			return nil, err
		}
		defer clear(ec.PrivateKey)
		if len(ec.Curve) != 0 && !ec.Curve.Equal(oidCurveP256) {
			return nil, errors.New("ec private key names another curve than its algorithm")
		}
		k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), ec.PrivateKey)
		if err != nil {
			return nil, err
		}
		return k, nil
	case a.Algorithm.Equal(oidPublicKeyEd25519):
		var seed []byte
		if err := unmarshalAll(p.PrivateKey, &seed); err != nil {
			return nil, err
		}
		defer clear(seed)
		if len(a.Parameters.FullBytes) != 0 || len(seed) != ed25519.SeedSize {
			return nil, errors.New("malformed ed25519 private key")
		}
		return ed25519.NewKeyFromSeed(seed), nil
	default:
		return nil, algorithmKind(a.Algorithm)
	}
}
