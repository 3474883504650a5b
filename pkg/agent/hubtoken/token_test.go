package hubtoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// jwt builds an unsigned compact JWS with the given claims: the renewer
// never checks signatures (the apiserver does).
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + ".c2ln"
}

func saClaims(ns, name, uid string, iat, exp time.Time) map[string]any {
	return map[string]any{"iat": iat.Unix(), "exp": exp.Unix(), "nbf": iat.Unix(), "sub": "system:serviceaccount:" + ns + ":" + name,
		"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": name, "uid": uid}}}
}

func saToken(t *testing.T, uid string, iat, exp time.Time) Token {
	t.Helper()
	tok, err := Parse(jwt(t, saClaims("flotilla-es-member1", "flotilla-agent", uid, iat, exp)))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestParse(t *testing.T) {
	good := jwt(t, saClaims("flotilla-es-member1", "flotilla-agent", "u1", t0, t0.Add(24*time.Hour)))
	tok, err := Parse(good + "\n") // token files often end in a newline
	if err != nil {
		t.Fatal(err)
	}
	if tok.Namespace != "flotilla-es-member1" || tok.ServiceAccount != "flotilla-agent" || tok.UID != "u1" ||
		!tok.IssuedAt.Equal(t0) || !tok.Expiry.Equal(t0.Add(24*time.Hour)) || tok.Lifetime() != 24*time.Hour || tok.Raw != good {
		t.Fatalf("Parse = %+v", tok)
	}
	noIat := saClaims("ns", "sa", "u", t0, t0.Add(time.Hour))
	delete(noIat, "iat")
	if tok, err := Parse(jwt(t, noIat)); err != nil || !tok.IssuedAt.Equal(t0) {
		t.Fatalf("without iat the issue time is nbf: %+v, %v", tok, err)
	}
	noExp := saClaims("ns", "sa", "u", t0, t0)
	delete(noExp, "exp")
	notSA := map[string]any{"exp": t0.Unix(), "sub": "alice"}
	for name, raw := range map[string]string{
		"opaque token":         "abcdef.0123456789abcdef", // a bootstrap-token-like credential
		"static token":         "s3cr3t",
		"no exp (legacy SA)":   jwt(t, noExp),
		"not a ServiceAccount": jwt(t, notSA),
		"bad base64":           "a.!!!.c",
		"bad JSON":             "a." + base64.RawURLEncoding.EncodeToString([]byte("{")) + ".c",
	} {
		if _, err := Parse(raw); !errors.Is(err, ErrNotRenewable) {
			t.Errorf("%s: Parse error %v, want ErrNotRenewable", name, err)
		}
	}
}

func TestPrefer(t *testing.T) {
	kubeconfig := saToken(t, "u1", t0, t0.Add(time.Hour))
	later := saToken(t, "u1", t0.Add(30*time.Minute), t0.Add(90*time.Minute))
	earlier := saToken(t, "u1", t0.Add(-time.Hour), t0.Add(30*time.Minute))
	recreated := saToken(t, "u2", t0.Add(30*time.Minute), t0.Add(10*time.Hour)) // same name, new ServiceAccount object
	other, err := Parse(jwt(t, saClaims("flotilla-es-member2", "flotilla-agent", "u1", t0, t0.Add(10*time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name               string
		current, candidate Token
		want               Token
	}{
		{"later expiry wins", kubeconfig, later, later},
		{"earlier expiry loses", kubeconfig, earlier, kubeconfig},
		{"equal is no change", kubeconfig, kubeconfig, kubeconfig},
		{"another ServiceAccount object never wins", kubeconfig, recreated, kubeconfig},
		{"another cluster's identity never wins", kubeconfig, other, kubeconfig},
		{"nothing stored", kubeconfig, Token{}, kubeconfig},
		{"nothing current", Token{}, later, later},
	}
	for _, tc := range cases {
		if got := Prefer(tc.current, tc.candidate); got.Raw != tc.want.Raw {
			t.Errorf("%s: Prefer = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFileStoreKeepsTheLaterToken(t *testing.T) {
	ctx := context.Background()
	s := &FileStore{Path: filepath.Join(t.TempDir(), "hub-token")}
	if raw, err := s.Load(ctx); err != nil || raw != "" {
		t.Fatalf("empty store: %q, %v", raw, err)
	}
	first := saToken(t, "u1", t0, t0.Add(time.Hour))
	second := saToken(t, "u1", t0.Add(time.Minute), t0.Add(2*time.Hour))
	for _, step := range []struct {
		save Token
		want string
	}{
		{first, first.Raw},
		{second, second.Raw},
		{first, second.Raw}, // a sibling's older token does not replace a later one
	} {
		if err := s.Save(ctx, step.save); err != nil {
			t.Fatal(err)
		}
		if raw, err := s.Load(ctx); err != nil || raw != step.want {
			t.Fatalf("after saving %v: stored %q (%v), want %q", step.save, raw, err, step.want)
		}
	}
	info, err := os.Stat(s.Path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v (%v), want 0600", info.Mode(), err)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Dir(s.Path))
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %s, want only the token", strings.Join(names, ", "))
	}
	// A new identity (the cluster was registered again) replaces the old one.
	recreated := saToken(t, "u2", t0.Add(time.Minute), t0.Add(time.Hour))
	if err := s.Save(ctx, recreated); err != nil {
		t.Fatal(err)
	}
	if raw, _ := s.Load(ctx); raw != recreated.Raw {
		t.Fatalf("a token of another ServiceAccount object was not stored")
	}
}
