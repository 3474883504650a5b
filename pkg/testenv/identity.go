package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Option changes how Start runs the control plane.
type Option func(*settings)

type settings struct {
	auditLog     bool
	auditLogPath string
	controllers  []string // kube-controller-manager's; none: not started
}

// WithAuditLog makes the apiserver write an audit log (every request, at
// level Metadata) that RefusedRequests reads: the apiserver's own account of
// which requests it refused whom.
func WithAuditLog() Option {
	return func(s *settings) { s.auditLog = true }
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func (s *settings) configureAudit(t testing.TB, te *envtest.Environment) error {
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	s.auditLogPath = filepath.Join(dir, "audit.log")
	te.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", s.auditLogPath).
		Set("audit-log-format", "json").
		Set("audit-log-mode", "blocking")
	return nil
}

// auditEvent is what RefusedRequests reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	RequestURI     string `json:"requestURI"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
}

// RefusedRequests lists, from the audit log (WithAuditLog), the requests the
// apiserver answered 403 Forbidden for any of users, one line each:
// "user verb resource[/subresource] [namespace/name] (API group): message".
func (e *Env) RefusedRequests(t testing.TB, users ...string) []string {
	t.Helper()
	if e.auditLog == "" {
		t.Fatal("testenv: RefusedRequests needs Start(t, testenv.WithAuditLog())")
	}
	var out []string
	for _, ev := range e.completedRequests(t) {
		if ev.ResponseStatus.Code != 403 || !slices.Contains(users, ev.User.Username) {
			continue
		}
		what := ev.RequestURI
		if r := ev.ObjectRef; r != nil {
			what = r.Resource
			if r.Subresource != "" {
				what += "/" + r.Subresource
			}
			if r.Name != "" {
				what += " " + r.Namespace + "/" + r.Name
			} else if r.Namespace != "" {
				what += " in " + r.Namespace
			}
			what += fmt.Sprintf(" (API group %q)", r.APIGroup)
		}
		out = append(out, fmt.Sprintf("%s %s %s: %s", ev.User.Username, ev.Verb, what, ev.ResponseStatus.Message))
	}
	return out
}

// completedRequests reads the audit log (WithAuditLog): every request's
// ResponseComplete event that has a response status.
func (e *Env) completedRequests(t testing.TB) []auditEvent {
	t.Helper()
	f, err := os.Open(e.auditLog)
	if err != nil {
		t.Fatalf("testenv: audit log: %v", err)
	}
	defer func() { _ = f.Close() }()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Stage == "ResponseComplete" && ev.ResponseStatus != nil {
			out = append(out, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("testenv: reading the audit log: %v", err)
	}
	return out
}

// ServiceAccountConfig returns a client configuration that authenticates as
// the ServiceAccount namespace/name with a token from the TokenRequest API
// (as `kubectl create token` gets one), with the rights RBAC gives that
// ServiceAccount and no other: no client certificate, no admin.
func (e *Env) ServiceAccountConfig(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	tr, err := e.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(time.Hour / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: TokenRequest for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// ServiceAccountUser is the user name the apiserver gives a ServiceAccount.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}
