package testenv

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceAccountToken mints a bound ServiceAccount token for namespace/name
// valid for lifetime, signed with the test apiserver's own ServiceAccount
// signing key (envtest passes --service-account-signing-key-file from its
// cert dir, with --service-account-issuer as the only API audience). The
// apiserver validates it like one it issued (issuer, audience, signature,
// the ServiceAccount's name and UID). TokenRequest refuses lifetimes under
// 10 minutes; this is how a test crosses real expiries in seconds.
func (e *Env) ServiceAccountToken(t testing.TB, namespace, name string, lifetime time.Duration) string {
	t.Helper()
	sa, err := e.Kube.CoreV1().ServiceAccounts(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("testenv: ServiceAccount %s/%s: %v", namespace, name, err)
	}
	apiserver := e.env.ControlPlane.APIServer
	key, err := readSigningKey(filepath.Join(apiserver.CertDir, "sa-signer.key"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	issuer := apiserver.SecureServing.URL("https", "/").String()
	now := time.Now()
	claims := map[string]any{
		"iss": issuer, "aud": []string{issuer}, "sub": "system:serviceaccount:" + namespace + ":" + name,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(lifetime).Unix(), "jti": uuid.NewString(),
		"kubernetes.io": map[string]any{"namespace": namespace, "serviceaccount": map[string]any{"name": name, "uid": string(sa.UID)}},
	}
	token, err := signJWT(key, claims)
	if err != nil {
		t.Fatalf("testenv: signing a ServiceAccount token: %v", err)
	}
	return token
}

func readSigningKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the apiserver's ServiceAccount signing key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", path)
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return x509.ParsePKCS1PrivateKey(block.Bytes)
}

// signJWT signs claims as a compact JWS with the algorithm the apiserver
// uses for key (ES256 or RS256) and its key ID (the apiserver's
// keyIDFromPublicKey: base64url of the SHA-256 of the PKIX public key).
func signJWT(key crypto.Signer, claims map[string]any) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", err
	}
	kid := sha256.Sum256(der)
	header := map[string]string{"kid": base64.RawURLEncoding.EncodeToString(kid[:])}
	switch key.(type) {
	case *ecdsa.PrivateKey:
		header["alg"] = "ES256"
	case *rsa.PrivateKey:
		header["alg"] = "RS256"
	default:
		return "", fmt.Errorf("unsupported signing key %T", key)
	}
	enc := func(v any) (string, error) {
		b, err := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b), err
	}
	h, err := enc(header)
	if err != nil {
		return "", err
	}
	c, err := enc(claims)
	if err != nil {
		return "", err
	}
	digest := sha256.Sum256([]byte(h + "." + c))
	var sig []byte
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		// JWS wants r||s, each left-padded to the curve size, not ASN.1.
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			return "", err
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	case *rsa.PrivateKey:
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:]); err != nil {
			return "", err
		}
	}
	return h + "." + c + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
