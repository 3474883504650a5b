package forbidden

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const hubUser = "system:serviceaccount:flotilla-system:flotilla-hub"

// authzError is the error the apiserver returns when RBAC refuses a
// request (responsewriters.ForbiddenStatusError).
func authzError(verb, resource, sub, group, ns, name string) error {
	r := resource
	if sub != "" {
		r += "/" + sub
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", hubUser, verb, r, group)
	if ns != "" {
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", hubUser, verb, r, group, ns)
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, name, errors.New(msg))
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Denial
		ok   bool
	}{
		{name: "namespaced status subresource", err: authzError("patch", "resourcebindings", "status", "work.flotilla.io", "default", "nginx-deployment"),
			want: Denial{Verb: "patch", Resource: "resourcebindings/status", Group: "work.flotilla.io", Namespace: "default", User: hubUser}, ok: true},
		{name: "cluster scope", err: authzError("update", "clusterresourcebindings", "status", "work.flotilla.io", "", "x"),
			want: Denial{Verb: "update", Resource: "clusterresourcebindings/status", Group: "work.flotilla.io", User: hubUser}, ok: true},
		{name: "core group", err: authzError("create", "events", "", "", "default", ""),
			want: Denial{Verb: "create", Resource: "events", Namespace: "default", User: hubUser}, ok: true},
		{name: "wrapped", err: fmt.Errorf("work for cluster member1: %w", authzError("create", "works", "", "work.flotilla.io", "flotilla-es-member1", "w")),
			want: Denial{Verb: "create", Resource: "works", Group: "work.flotilla.io", Namespace: "flotilla-es-member1", User: hubUser}, ok: true},
		// A 403 from admission is not a missing permission.
		{name: "namespace terminating", err: apierrors.NewForbidden(schema.GroupResource{Group: "work.flotilla.io", Resource: "works"}, "w",
			errors.New("unable to create new content in namespace flotilla-es-member1 because it is being terminated"))},
		{name: "admission policy", err: apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system",
			errors.New("ValidatingAdmissionPolicy 'flotilla-hub-scope' with binding 'flotilla-hub-scope' denied request: the Flotilla hub may only create or delete namespaces named flotilla-es-*"))},
		{name: "conflict", err: apierrors.NewConflict(schema.GroupResource{Resource: "works"}, "w", errors.New("changed"))},
		{name: "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.err)
			if ok != tc.ok || got != tc.want {
				t.Errorf("Parse = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestMessageNamesThePermissionAndTheRole(t *testing.T) {
	d, _ := Parse(authzError("patch", "resourcebindings", "status", "work.flotilla.io", "default", "b"))
	msg := d.Message("the binding's status is not written")
	for _, want := range []string{"patch resourcebindings/status in API group work.flotilla.io in namespace default",
		"the binding's status is not written", "ClusterRole flotilla:hub"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	core := Denial{Verb: "create", Resource: "events"}
	if got := core.Permission(); got != `create events in API group "" (core)` {
		t.Errorf("core permission = %q", got)
	}
}

func TestDenialsNotifyOnChangeOnly(t *testing.T) {
	var d Denials
	var seen []string
	d.OnChange(func(key string) { seen = append(seen, key) })
	den := Denial{Verb: "patch", Resource: "resourcebindings/status"}
	d.Refused("ns/a", den)
	d.Refused("ns/a", den) // the same again: no news
	if got, ok := d.Get("ns/a"); !ok || got != den {
		t.Fatalf("Get = %+v, %v", got, ok)
	}
	d.Refused("ns/a", Denial{Verb: "update", Resource: "resourcebindings/status"})
	d.Allowed("ns/a")
	d.Allowed("ns/a") // nothing recorded: no news
	d.Allowed("ns/b")
	if _, ok := d.Get("ns/a"); ok {
		t.Error("denial kept after a successful write")
	}
	if want := "ns/a,ns/a,ns/a"; strings.Join(seen, ",") != want {
		t.Errorf("notified %v, want %s", seen, want)
	}
	var none *Denials // a controller without denials wired
	none.Refused("x", den)
	none.Allowed("x")
	if _, ok := none.Get("x"); ok {
		t.Error("nil Denials remembered something")
	}
}

// The transport counts refused writes by resource and verb and leaves the
// response for the client to read as before.
func TestTransportCountsRefusedWrites(t *testing.T) {
	refusal := func(w http.ResponseWriter, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":"Forbidden","code":403}`, msg)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			refusal(w, `resourcebindings.work.flotilla.io "b" is forbidden: User "`+hubUser+`" cannot patch resource "resourcebindings/status" in API group "work.flotilla.io" in the namespace "default"`)
		case "/list":
			refusal(w, `works.work.flotilla.io is forbidden: User "`+hubUser+`" cannot list resource "works" in API group "work.flotilla.io" at the cluster scope`)
		case "/terminating":
			refusal(w, `works.work.flotilla.io "w" is forbidden: unable to create new content in namespace flotilla-es-m because it is being terminated`)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	writes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "forbidden_writes_total"}, []string{"resource", "verb"})
	client := &http.Client{Transport: Transport(http.DefaultTransport, writes)}
	do := func(method, path string) string {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if body := do(http.MethodPatch, "/status"); !strings.Contains(body, `cannot patch resource \"resourcebindings/status\"`) {
		t.Errorf("the client no longer sees the Status: %q", body)
	}
	do(http.MethodPatch, "/status")
	do(http.MethodGet, "/list")         // a read: not a write
	do(http.MethodPost, "/terminating") // admission, not a permission
	do(http.MethodPost, "/ok")
	var m dto.Metric
	if err := writes.WithLabelValues("resourcebindings/status", "patch").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 2 {
		t.Errorf("refused status patches counted %v, want 2", got)
	}
	series := make(chan prometheus.Metric, 10)
	writes.Collect(series)
	close(series)
	if n := len(series); n != 1 {
		t.Errorf("%d series, want only the status patch's", n)
	}
}
