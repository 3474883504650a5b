package testenv

import (
	"fmt"
	"slices"
	"testing"
)

// FailedWrites lists, from the audit log (WithAuditLog), the writes
// (create, update, patch) to any of resources ("resourcebindings/status",
// "works") that the apiserver answered with an error other than a
// conflict (409, a stale resourceVersion the writer retries) or not found,
// one line each: "verb resource namespace/name: code message". A status
// write refused as too long, invalid or too large for etcd is listed.
func (e *Env) FailedWrites(t testing.TB, resources ...string) []string {
	t.Helper()
	if e.auditLog == "" {
		t.Fatal("testenv: FailedWrites needs Start(t, testenv.WithAuditLog())")
	}
	var out []string
	for _, ev := range e.completedRequests(t) {
		if ev.ObjectRef == nil || !slices.Contains([]string{"create", "update", "patch"}, ev.Verb) {
			continue
		}
		code := ev.ResponseStatus.Code
		if code < 400 || code == 404 || code == 409 {
			continue
		}
		r := ev.ObjectRef
		what := r.Resource
		if r.Subresource != "" {
			what += "/" + r.Subresource
		}
		if !slices.Contains(resources, what) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s: %d %s", ev.Verb, what, r.Namespace, r.Name, code, ev.ResponseStatus.Message))
	}
	return out
}
