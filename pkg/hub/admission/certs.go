package admission

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Keys of the webhook's Secret besides tls.crt and tls.key (the serving
// certificate and its key, corev1.TLSCertKey and corev1.TLSPrivateKeyKey).
const (
	// CACertKey holds the CAs the apiserver trusts (the
	// ValidatingWebhookConfiguration's caBundle), PEM: the newest CA first,
	// then older ones until they expire, so a replica still serving a
	// certificate of the previous CA is trusted while it reloads.
	CACertKey = "ca.crt"
	// CAKeyKey is the newest CA's private key: whichever hub replica renews
	// the serving certificate signs it with that key.
	CAKeyKey = "ca.key"
)

// Lifetimes. A certificate is renewed once two thirds of its lifetime have
// passed: the serving certificate after about 8 months (signed by the same
// CA, so the caBundle does not change), the CA after about 6.7 years (the
// new CA is added to the bundle beside the old one, then a new serving
// certificate is issued).
const (
	CALifetime          = 10 * 365 * 24 * time.Hour
	CertificateLifetime = 365 * 24 * time.Hour
	// backdate is how far NotBefore lies before now, for apiservers whose
	// clock is a little behind the hub's.
	backdate = 5 * time.Minute
)

// Hosts are the names the serving certificate is for.
type Hosts struct {
	DNSNames []string
	IPs      []net.IP
}

// ServingHosts are the webhook Service's DNS names and the loopback
// addresses (a hub run as a local process, as `make up` does, is called at
// https://127.0.0.1:<port>).
func ServingHosts(service, namespace string) Hosts {
	return Hosts{
		DNSNames: []string{service, service + "." + namespace, service + "." + namespace + ".svc",
			service + "." + namespace + ".svc.cluster.local", "localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
	}
}

// Issued says what PlanSecret issued.
type Issued struct {
	CA, Certificate bool
}

// PlanSecret returns the Secret data the webhook should serve with at now:
// data itself when it holds a CA that is not due for rotation and a serving
// certificate of that CA for hosts that is not due for renewal; otherwise
// data with a new CA and/or a new serving certificate (expired CAs are
// dropped from the bundle). renewAt is when the result is next due.
func PlanSecret(data map[string][]byte, hosts Hosts, now time.Time) (out map[string][]byte, issued Issued, renewAt time.Time, err error) {
	cas, caKey := parseCAs(data)
	var current *x509.Certificate
	if len(cas) > 0 && caKey != nil && cas[0].IsCA && publicKeyMatches(cas[0], caKey) && now.Before(dueAt(cas[0])) {
		current = cas[0]
	}
	if current == nil {
		current, caKey, err = newCA(now)
		if err != nil {
			return nil, Issued{}, time.Time{}, err
		}
		issued.CA = true
		cas = append([]*x509.Certificate{current}, cas...)
	}
	// Keep the CAs that are still valid (the current one first).
	kept := slices.DeleteFunc(slices.Clone(cas), func(c *x509.Certificate) bool { return c != current && !now.Before(c.NotAfter) })
	caPEM, err := certutil.EncodeCertificates(kept...)
	if err != nil {
		return nil, Issued{}, time.Time{}, err
	}
	certPEM, keyPEM := data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]
	cert := servingCertificate(certPEM, keyPEM, current, hosts, now)
	if issued.CA || cert == nil {
		if cert, certPEM, keyPEM, err = newServingCertificate(current, caKey, hosts, now); err != nil {
			return nil, Issued{}, time.Time{}, err
		}
		issued.Certificate = true
	}
	caKeyPEM := data[CAKeyKey]
	if issued.CA {
		if caKeyPEM, err = keyutil.MarshalPrivateKeyToPEM(caKey); err != nil {
			return nil, Issued{}, time.Time{}, err
		}
	}
	out = map[string][]byte{CACertKey: caPEM, CAKeyKey: caKeyPEM, corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}
	renewAt = dueAt(current)
	if d := dueAt(cert); d.Before(renewAt) {
		renewAt = d
	}
	return out, issued, renewAt, nil
}

// SameSecretData reports whether a and b hold the same webhook keys.
func SameSecretData(a, b map[string][]byte) bool {
	for _, k := range []string{CACertKey, CAKeyKey, corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if !bytes.Equal(a[k], b[k]) {
			return false
		}
	}
	return true
}

// dueAt is when c is renewed: two thirds into its lifetime.
func dueAt(c *x509.Certificate) time.Time {
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3)
}

func parseCAs(data map[string][]byte) ([]*x509.Certificate, crypto.Signer) {
	cas, err := certutil.ParseCertsPEM(data[CACertKey])
	if err != nil {
		return nil, nil
	}
	key, err := keyutil.ParsePrivateKeyPEM(data[CAKeyKey])
	if err != nil {
		return cas, nil
	}
	signer, _ := key.(crypto.Signer)
	return cas, signer
}

func publicKeyMatches(c *x509.Certificate, key crypto.Signer) bool {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(c.PublicKey)
}

// servingCertificate returns the certificate of certPEM when it and keyPEM
// are a pair, it was signed by ca, covers hosts and is not due at now; nil
// otherwise.
func servingCertificate(certPEM, keyPEM []byte, ca *x509.Certificate, hosts Hosts, now time.Time) *x509.Certificate {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || !now.Before(dueAt(cert)) {
		return nil
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil
	}
	for _, name := range hosts.DNSNames {
		if cert.VerifyHostname(name) != nil {
			return nil
		}
	}
	for _, ip := range hosts.IPs {
		if cert.VerifyHostname(ip.String()) != nil {
			return nil
		}
	}
	return cert
}

func newCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("flotilla-hub-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func newServingCertificate(ca *x509.Certificate, caKey crypto.Signer, hosts Hosts, now time.Time) (*x509.Certificate, []byte, []byte, error) {
	if len(hosts.DNSNames) == 0 {
		return nil, nil, nil, errors.New("a serving certificate needs at least one DNS name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, nil, err
	}
	notAfter := now.Add(CertificateLifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts.DNSNames[0]},
		DNSNames:     hosts.DNSNames,
		IPAddresses:  hosts.IPs,
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, certPEM, keyPEM, nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}
