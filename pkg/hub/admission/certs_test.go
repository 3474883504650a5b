package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
)

var hosts = ServingHosts("flotilla-hub-webhook", "flotilla-system")

func mustPlan(t *testing.T, data map[string][]byte, h Hosts, now time.Time) (map[string][]byte, Issued, time.Time) {
	t.Helper()
	out, issued, renewAt, err := PlanSecret(data, h, now)
	if err != nil {
		t.Fatal(err)
	}
	return out, issued, renewAt
}

func leafOf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// verifies reports whether the serving certificate of data is trusted by
// the bundle caPEM for name at now.
func verifies(t *testing.T, data map[string][]byte, caPEM []byte, name string, now time.Time) bool {
	t.Helper()
	pool, err := certutil.NewPoolFromBytes(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, err = leafOf(t, data).Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}

func TestPlanSecretIssuesACAAndACertificateForTheServiceAndLoopback(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, issued, renewAt := mustPlan(t, nil, hosts, now)
	if !issued.CA || !issued.Certificate {
		t.Fatalf("issued %+v, want both", issued)
	}
	for _, name := range []string{"flotilla-hub-webhook.flotilla-system.svc", "flotilla-hub-webhook.flotilla-system.svc.cluster.local", "127.0.0.1", "localhost", "::1"} {
		if !verifies(t, data, data[CACertKey], name, now) {
			t.Errorf("the serving certificate is not trusted for %s", name)
		}
	}
	if verifies(t, data, data[CACertKey], "other.flotilla-system.svc", now) {
		t.Error("the serving certificate is trusted for a name it is not for")
	}
	if _, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Errorf("tls.crt and tls.key are not a pair: %v", err)
	}
	leaf := leafOf(t, data)
	if got := leaf.NotAfter.Sub(now); got != CertificateLifetime {
		t.Errorf("serving certificate lifetime %v, want %v", got, CertificateLifetime)
	}
	if want := leaf.NotBefore.Add((CertificateLifetime + backdate) * 2 / 3); !renewAt.Equal(want) {
		t.Errorf("renewAt %v, want %v (two thirds into the certificate's life)", renewAt, want)
	}

	// Steady: the same data, nothing issued, until the renewal is due.
	again, issued, _ := mustPlan(t, data, hosts, renewAt.Add(-time.Minute))
	if issued != (Issued{}) || !SameSecretData(again, data) {
		t.Fatalf("a Secret not due changed: issued %+v", issued)
	}
}

func TestPlanSecretRenewsTheCertificateWithTheSameCA(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, _, renewAt := mustPlan(t, nil, hosts, now)
	renewed, issued, next := mustPlan(t, data, hosts, renewAt)
	if issued.CA || !issued.Certificate {
		t.Fatalf("issued %+v, want a certificate only", issued)
	}
	if !bytes.Equal(renewed[CACertKey], data[CACertKey]) || !bytes.Equal(renewed[CAKeyKey], data[CAKeyKey]) {
		t.Error("renewing the serving certificate changed the CA (and so the caBundle)")
	}
	if bytes.Equal(renewed[corev1.TLSCertKey], data[corev1.TLSCertKey]) || !next.After(renewAt) {
		t.Error("the serving certificate was not renewed")
	}
	if !verifies(t, renewed, data[CACertKey], "localhost", renewAt) {
		t.Error("the renewed certificate is not trusted by the CA already in the caBundle")
	}
}

func TestPlanSecretRotatesTheCAKeepingTheOldOneUntilItExpires(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, _, _ := mustPlan(t, nil, hosts, now)
	caDue := now.Add(CALifetime * 2 / 3)
	rotated, issued, _ := mustPlan(t, data, hosts, caDue)
	if !issued.CA || !issued.Certificate {
		t.Fatalf("issued %+v at the CA's renewal, want both", issued)
	}
	bundle, err := certutil.ParseCertsPEM(rotated[CACertKey])
	if err != nil || len(bundle) != 2 {
		t.Fatalf("bundle after rotation: %d CAs (%v), want the new and the old", len(bundle), err)
	}
	// A replica still serving the old certificate is trusted by the new
	// bundle, and the new certificate too.
	if !verifies(t, rotated, rotated[CACertKey], "localhost", caDue) {
		t.Error("the new certificate is not trusted by the new bundle")
	}
	old := map[string][]byte{corev1.TLSCertKey: data[corev1.TLSCertKey]}
	if !verifies(t, old, rotated[CACertKey], "localhost", leafOf(t, data).NotAfter.Add(-time.Hour)) {
		t.Error("the old CA's certificate is not trusted by the new bundle")
	}
	// Once the old CA has expired, it leaves the bundle at the next change.
	later := bundle[1].NotAfter.Add(time.Hour)
	pruned, _, _ := mustPlan(t, rotated, hosts, later)
	if cas, _ := certutil.ParseCertsPEM(pruned[CACertKey]); len(cas) != 1 || !cas[0].Equal(bundle[0]) {
		t.Errorf("after the old CA expired the bundle holds %d CAs, want the current one", len(cas))
	}
}

func TestPlanSecretReissuesWhatDoesNotFit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, _, _ := mustPlan(t, nil, hosts, now)
	other, _, _ := mustPlan(t, nil, hosts, now)
	for name, tc := range map[string]struct {
		edit   func(map[string][]byte)
		hosts  Hosts
		wantCA bool
	}{
		"another service name":  {nil, ServingHosts("renamed", "flotilla-system"), false},
		"a key of another cert": {func(d map[string][]byte) { d[corev1.TLSPrivateKeyKey] = other[corev1.TLSPrivateKeyKey] }, hosts, false},
		"a certificate of another CA": {func(d map[string][]byte) {
			d[corev1.TLSCertKey], d[corev1.TLSPrivateKeyKey] = other[corev1.TLSCertKey], other[corev1.TLSPrivateKeyKey]
		}, hosts, false},
		"no serving certificate":   {func(d map[string][]byte) { delete(d, corev1.TLSCertKey) }, hosts, false},
		"a CA key that is not its": {func(d map[string][]byte) { d[CAKeyKey] = other[CAKeyKey] }, hosts, true},
		"garbage":                  {func(d map[string][]byte) { d[CACertKey] = []byte("x") }, hosts, true},
	} {
		d := map[string][]byte{}
		for k, v := range data {
			d[k] = v
		}
		if tc.edit != nil {
			tc.edit(d)
		}
		out, issued, _ := mustPlan(t, d, tc.hosts, now)
		if !issued.Certificate || issued.CA != tc.wantCA {
			t.Errorf("%s: issued %+v, want a certificate (CA: %v)", name, issued, tc.wantCA)
			continue
		}
		if !verifies(t, out, out[CACertKey], tc.hosts.DNSNames[0]+".flotilla-system.svc", now) {
			t.Errorf("%s: the reissued certificate is not trusted by the bundle", name)
		}
	}
}

// The server serves a review over TLS with the certificate in use, and a
// new certificate set while it runs is the one the next connection gets.
func TestServerServesOverTLSAndSwapsCertificates(t *testing.T) {
	now := time.Now()
	data, _, _ := mustPlan(t, nil, hosts, now)
	certs := NewCertificates(nil)
	if certs.Ready() == nil {
		t.Fatal("ready without a certificate")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(ln.Addr().String(), NewHandler(refuseNonBool, nil), certs).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	call := func(caPEM []byte) (*x509.Certificate, error) {
		pool, err := certutil.NewPoolFromBytes(caPEM)
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		defer client.CloseIdleConnections()
		resp, err := client.Post("https://"+ln.Addr().String()+ValidatePath, "application/json",
			bytes.NewReader(reviewOf(t, admissionv1.Create, customization("true"))))
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"allowed":true`)) {
			t.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
		return resp.TLS.PeerCertificates[0], nil
	}
	if _, err := call(data[CACertKey]); err == nil {
		t.Fatal("served without a certificate")
	}
	if err := certs.Set(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Fatal(err)
	}
	if err := certs.Ready(); err != nil {
		t.Fatal(err)
	}
	first, err := call(data[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	noCert := map[string][]byte{CACertKey: data[CACertKey], CAKeyKey: data[CAKeyKey]}
	renewed, _, _ := mustPlan(t, noCert, hosts, now)
	if err := certs.Set(renewed[corev1.TLSCertKey], renewed[corev1.TLSPrivateKeyKey]); err != nil {
		t.Fatal(err)
	}
	second, err := call(data[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	if first.Equal(second) || !second.Equal(leafOf(t, renewed)) {
		t.Error("the server kept serving the first certificate after a new one was set")
	}
	if err := certs.Set([]byte("not a certificate"), nil); err == nil {
		t.Error("Set accepted garbage")
	}
}
