// Package hubtoken keeps the agent's hub credential alive: a ServiceAccount
// token (TokenRequest, minted by `hub agent-kubeconfig`) that nothing else
// renews. Left alone it expires, the agent goes silent and the hub evicts the
// cluster's workloads. The Renewer requests a new token for the agent's own
// ServiceAccount at a fraction of the current one's lifetime (kubelet's rule
// for projected tokens), serves it to every hub client as an oauth2
// TokenSource, and persists it so a restarted agent starts with the newest
// token rather than the expired one in its kubeconfig.
//
// Only tokens the agent can read are renewed: a JWT with an exp claim that
// names a ServiceAccount. A client certificate, an opaque or non-expiring
// token is left alone.
package hubtoken

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Token is what the renewer reads from a ServiceAccount JWT. The claims are
// read without verifying the signature: the agent only holds the token, the
// hub's apiserver verifies it.
type Token struct {
	Raw string
	// IssuedAt is the iat claim (nbf if absent; zero if neither).
	IssuedAt time.Time
	Expiry   time.Time
	// The ServiceAccount the token authenticates as.
	Namespace, ServiceAccount, UID string
}

// IsZero reports an absent token.
func (t Token) IsZero() bool { return t.Raw == "" }

// Lifetime is the token's validity from issue to expiry; zero if the issue
// time is unknown.
func (t Token) Lifetime() time.Duration {
	if t.IssuedAt.IsZero() {
		return 0
	}
	return t.Expiry.Sub(t.IssuedAt)
}

// SameIdentity reports whether both tokens authenticate as the same
// ServiceAccount object (a recreated ServiceAccount has another UID, and the
// apiserver refuses the old one's tokens).
func (t Token) SameIdentity(o Token) bool {
	return t.Namespace == o.Namespace && t.ServiceAccount == o.ServiceAccount && t.UID == o.UID
}

func (t Token) String() string {
	return fmt.Sprintf("%s/%s token expiring %s", t.Namespace, t.ServiceAccount, t.Expiry.UTC().Format(time.RFC3339))
}

// ErrNotRenewable is wrapped by Parse's errors: the credential is not a token
// this package renews.
var ErrNotRenewable = errors.New("not a ServiceAccount JWT with an expiry")

// claims are the parts of a ServiceAccount JWT (k8s.io/kubernetes
// pkg/serviceaccount/claims.go) the renewer reads.
type claims struct {
	Exp        *int64 `json:"exp"`
	Iat        *int64 `json:"iat"`
	Nbf        *int64 `json:"nbf"`
	Kubernetes *struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// Parse reads raw's claims. It fails (wrapping ErrNotRenewable) unless raw
// is a compact JWS whose payload has exp and names a ServiceAccount.
// Decoding the payload by hand keeps a JWT library out of the agent: it
// needs no signature check, only two base64url+JSON steps.
func Parse(raw string) (Token, error) {
	raw = strings.TrimSpace(raw)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return Token{}, fmt.Errorf("%w: not a JWT (%d dot-separated parts)", ErrNotRenewable, len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return Token{}, fmt.Errorf("%w: JWT payload: %v", ErrNotRenewable, err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Token{}, fmt.Errorf("%w: JWT claims: %v", ErrNotRenewable, err)
	}
	if c.Exp == nil {
		return Token{}, fmt.Errorf("%w: the JWT has no exp claim (it never expires)", ErrNotRenewable)
	}
	if c.Kubernetes == nil || c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" {
		return Token{}, fmt.Errorf("%w: the JWT names no ServiceAccount (kubernetes.io claim)", ErrNotRenewable)
	}
	t := Token{Raw: raw, Expiry: time.Unix(*c.Exp, 0),
		Namespace: c.Kubernetes.Namespace, ServiceAccount: c.Kubernetes.ServiceAccount.Name, UID: c.Kubernetes.ServiceAccount.UID}
	switch {
	case c.Iat != nil:
		t.IssuedAt = time.Unix(*c.Iat, 0)
	case c.Nbf != nil:
		t.IssuedAt = time.Unix(*c.Nbf, 0)
	}
	return t, nil
}

// Prefer returns the token to use of current (from the kubeconfig or in
// use) and candidate (persisted, or a newer kubeconfig token file): the
// candidate only if it is the same ServiceAccount object and expires later.
// Another identity never wins over the kubeconfig's: a Secret left over from
// a cluster registered under another name, or from before its ServiceAccount
// was recreated, must not replace the credential the admin just handed out.
func Prefer(current, candidate Token) Token {
	if current.IsZero() {
		return candidate
	}
	if candidate.IsZero() || !candidate.SameIdentity(current) || !candidate.Expiry.After(current.Expiry) {
		return current
	}
	return candidate
}
