package scheduler

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
)

func testGroups() *workloadGroups {
	return &workloadGroups{assumed: map[string]*workv1alpha1.ResourceBinding{},
		indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
			IndexWorkloadAffinityGroup: affinityGroupIndex, IndexWorkloadAntiAffinityGroup: antiAffinityGroupIndex})}
}

func groupBinding(ns, name, rv, anti string, clusters ...string) *workv1alpha1.ResourceBinding {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv},
		Spec: workv1alpha1.ResourceBindingSpec{WorkloadAffinityGroups: &workv1alpha1.WorkloadAffinityGroups{AntiAffinityGroup: anti}}}
	for _, c := range clusters {
		b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: c})
	}
	return b
}

// The index gives a binding its own namespace's group only; a placement
// the scheduler wrote counts until the informer has delivered it.
func TestWorkloadGroupsPeersAndAssumptions(t *testing.T) {
	w := testGroups()
	self := groupBinding("a", "primary", "10", "g=db")
	for _, b := range []*workv1alpha1.ResourceBinding{self, groupBinding("a", "replica", "11", "g=db"),
		groupBinding("b", "squatter", "12", "g=db", "member1"), groupBinding("a", "web", "13", "g=web", "member2")} {
		if err := w.indexer.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	peers := w.peers(self)
	if len(peers) != 1 || peers[0].Name != "replica" || len(peers[0].Clusters) != 0 {
		t.Fatalf("peers %+v, want the unplaced replica alone", peers)
	}
	// The scheduler placed the replica on member3 (stored at rv 20); the
	// informer still has rv 11.
	w.assume(groupBinding("a", "replica", "20", "g=db", "member3"))
	if p := w.peers(self); len(p) != 1 || len(p[0].Clusters) != 1 || p[0].Clusters[0] != "member3" {
		t.Fatalf("peers %+v, want the replica on member3 (assumed)", p)
	}
	// An older delivery keeps the assumption; the written one drops it.
	w.observe(groupBinding("a", "replica", "15", "g=db"), false)
	if _, ok := w.assumed["a/replica"]; !ok {
		t.Fatal("assumption dropped by an older delivery")
	}
	delivered := groupBinding("a", "replica", "20", "g=db", "member3")
	if err := w.indexer.Update(delivered); err != nil {
		t.Fatal(err)
	}
	w.observe(delivered, false)
	if _, ok := w.assumed["a/replica"]; ok {
		t.Fatal("assumption kept after the informer delivered it")
	}
	if p := w.peers(self); len(p) != 1 || len(p[0].Clusters) != 1 || p[0].Clusters[0] != "member3" {
		t.Fatalf("peers %+v, want the replica on member3 (delivered)", p)
	}
}

// Workers deciding the members of one anti-affinity group at once, each
// under the group's lock and assuming its result before releasing it, as
// schedule does, never put two on one cluster although the informer has
// delivered none of their writes.
func TestWorkloadGroupsLockKeepsConcurrentDecisionsApart(t *testing.T) {
	fleet := []string{"member1", "member2", "member3", "member4"}
	for iter := range 200 {
		w := testGroups()
		var bindings []*workv1alpha1.ResourceBinding
		for i := range len(fleet) {
			b := groupBinding("a", fmt.Sprintf("w%d", i), "1", "g=db")
			bindings = append(bindings, b)
			if err := w.indexer.Add(b); err != nil {
				t.Fatal(err)
			}
		}
		results := make([]string, len(bindings))
		var wg sync.WaitGroup
		for i, b := range bindings {
			wg.Add(1)
			go func() {
				defer wg.Done()
				unlock := w.lock(b)
				defer unlock()
				filter := core.NewWorkloadAffinity(b.Namespace, b.Name, b.Spec.WorkloadAffinityGroups, w.peers(b))
				for _, c := range fleet {
					if filter.Reject(c, false) == "" {
						results[i] = c
						break
					}
				}
				runtime.Gosched() // the write's round trip
				stored := b.DeepCopy()
				stored.ResourceVersion = strconv.Itoa(100 + i)
				stored.Spec.Clusters = []workv1alpha1.TargetCluster{{Name: results[i]}}
				w.assume(stored)
			}()
		}
		wg.Wait()
		seen := map[string]string{}
		for i, c := range results {
			if c == "" {
				t.Fatalf("iter %d: w%d found no cluster (%v)", iter, i, results)
			}
			if other, ok := seen[c]; ok {
				t.Fatalf("iter %d: %s and w%d share %s (%v)", iter, other, i, c, results)
			}
			seen[c] = fmt.Sprintf("w%d", i)
		}
	}
}
