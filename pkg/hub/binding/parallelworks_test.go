package binding

import (
	"context"
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// TestEnsureWorksWritesEveryTargetAndKeepsEachResult: the Works of one
// binding written in parallel each get their own result, in place: every
// missing Work is created once, and a stored Work another binding owns is
// a conflict for its cluster only, never written.
func TestEnsureWorksWritesEveryTargetAndKeepsEachResult(t *testing.T) {
	binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "uid-app"}}
	work := func(cluster, owner string) *workv1alpha1.Work {
		return &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "app-work", Namespace: "flotilla-es-" + cluster,
			Annotations: map[string]string{workobjects.AnnotationBindingName: owner, workobjects.AnnotationBindingNamespace: "ns"}}}
	}
	other := work("c07", "other")
	client := fake.NewSimpleClientset(other)
	works := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := works.Add(other); err != nil {
		t.Fatal(err)
	}
	c := &Controller{client: client, works: works}
	var writes []workWrite
	for i := range 3 * MaxParallelWorkWrites {
		cluster := fmt.Sprintf("c%02d", i)
		writes = append(writes, workWrite{cluster: cluster, want: work(cluster, "app")})
	}
	c.ensureWorks(context.Background(), binding, writes)
	created := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" {
			created++
		}
		if a.GetVerb() == "update" {
			t.Errorf("unexpected update of %s", a.GetNamespace())
		}
	}
	if want := len(writes) - 1; created != want {
		t.Errorf("%d Works created, want %d", created, want)
	}
	for _, w := range writes {
		conflict := (*workConflictError)(nil)
		switch {
		case w.cluster == "c07":
			if !errors.As(w.err, &conflict) || w.ok {
				t.Errorf("c07: ok=%v err=%v, want the other binding's conflict", w.ok, w.err)
			}
		case w.err != nil || !w.ok:
			t.Errorf("%s: ok=%v err=%v", w.cluster, w.ok, w.err)
		}
	}
}
