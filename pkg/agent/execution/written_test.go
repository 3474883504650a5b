package execution

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// The copy of a status write is kept while the lister is older than it and
// dropped once the lister has caught up, so it neither goes stale nor stays
// in memory for every Work ever written.
func TestForgetWritten(t *testing.T) {
	work := func(rv string) *workv1alpha1.Work {
		return &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", ResourceVersion: rv}}
	}
	cases := []struct {
		name   string
		lister string // the version the informer now holds
		kept   bool
	}{
		{"the version the write replaced", "10", true},
		{"an older version (a second write from the copy)", "9", true},
		{"the written version", "12", false},
		{"a newer version", "13", false},
		{"an unparsable version", "x", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{}
			c.written.Store("w", writtenWork{replaced: "10", work: work("12")})
			c.forgetWritten(work(tc.lister))
			if _, kept := c.written.Load("w"); kept != tc.kept {
				t.Errorf("kept = %v, want %v", kept, tc.kept)
			}
		})
	}
}

func TestStripManagedFields(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "annotations": map[string]any{"k": "v"},
			"managedFields": []any{map[string]any{"manager": "flotilla-agent", "operation": "Update"}}}}}
	if _, err := stripManagedFields(u); err != nil {
		t.Fatal(err)
	}
	if u.GetManagedFields() != nil || u.GetAnnotations()["k"] != "v" || u.GetName() != "a" {
		t.Fatalf("want only managedFields gone: %v", u.Object)
	}
	// A tombstone passes through.
	if _, err := stripManagedFields("not an object"); err != nil {
		t.Fatal(err)
	}
}
