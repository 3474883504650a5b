package cachetransform_test

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/cachetransform"
)

func TestSameManifest(t *testing.T) {
	const base = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"},"n":2}`
	for _, tc := range []struct {
		name string
		a, b string
		want bool
	}{
		{"equal bytes", base, base, true},
		{"keys reordered, spaces", base, `{"kind":"ConfigMap", "apiVersion":"v1","n":2,"data":{"k":"v"},"metadata":{"name":"a"}}`, true},
		{"2.0 for 2", base, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"},"n":2.0}`, true},
		{"a value changed", base, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"w"},"n":2}`, false},
		{"a key added", base, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v","x":""},"n":2}`, false},
		{"2.5 is not 2", base, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"},"n":2.5}`, false},
		{"large integers stay exact", `{"n":9007199254740993}`, `{"n":9007199254740992}`, false},
		{"not JSON, equal", `{`, `{`, true},
		{"not JSON, different", `{`, `[`, false},
	} {
		a, b := []byte(tc.a), []byte(tc.b)
		if got := cachetransform.SameManifest(a, b); got != tc.want {
			t.Errorf("%s: SameManifest(raw, raw) = %v, want %v", tc.name, got, tc.want)
		}
		// The cache holds the stored side as a digest.
		da := cachetransform.ManifestDigest(a)
		if got := cachetransform.SameManifest(da, b); got != tc.want {
			t.Errorf("%s: SameManifest(digest, raw) = %v, want %v", tc.name, got, tc.want)
		}
		if got := cachetransform.SameManifest(b, da); got != tc.want {
			t.Errorf("%s: SameManifest(raw, digest) = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Two digests are only known equal when they are.
	d := cachetransform.ManifestDigest([]byte(base))
	if !cachetransform.SameManifest(d, cachetransform.ManifestDigest([]byte(base))) {
		t.Error("equal digests differ")
	}
}

func TestDigestManifests(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)
	w := &workv1alpha1.Work{Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{
		{RawExtension: runtime.RawExtension{Raw: raw}}, {},
	}}}}
	if _, err := cachetransform.Strip(w); err != nil {
		t.Fatal(err)
	}
	got := w.Spec.Workload.Manifests[0].Raw
	if !cachetransform.IsDigest(got) || len(got) > 100 {
		t.Fatalf("cached manifest = %s, want a short digest", got)
	}
	if w.Spec.Workload.Manifests[1].Raw != nil {
		t.Errorf("an empty manifest became %s", w.Spec.Workload.Manifests[1].Raw)
	}
	// Idempotent: a digest is not digested again.
	if _, err := cachetransform.Strip(w); err != nil || string(w.Spec.Workload.Manifests[0].Raw) != string(got) {
		t.Errorf("second Strip changed the digest to %s (%v)", w.Spec.Workload.Manifests[0].Raw, err)
	}
	if !cachetransform.SameManifest(got, raw) {
		t.Error("the digest does not match its manifest")
	}
	if _, err := json.Marshal(w); err == nil {
		t.Error("a Work with a digest for a manifest encodes; it must fail rather than be written")
	}
}
