/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package scheduler

import (
	"hash/fnv"
	"slices"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Indexes of ResourceBindings by "<namespace>/<group>" (Karmada's
// ResourceBindingIndexByAffinityGroup and ...ByAntiAffinityGroup, scoped
// by namespace here): a schedule reads its group's peers, not the fleet's
// bindings.
const (
	IndexWorkloadAffinityGroup     = "byWorkloadAffinityGroup"
	IndexWorkloadAntiAffinityGroup = "byWorkloadAntiAffinityGroup"
)

func groupIndexKey(namespace, group string) string { return namespace + "/" + group }

func affinityGroupIndex(obj any) ([]string, error) {
	if rb, ok := obj.(*workv1alpha1.ResourceBinding); ok && rb.Namespace != "" && rb.Spec.WorkloadAffinityGroups != nil && rb.Spec.WorkloadAffinityGroups.AffinityGroup != "" {
		return []string{groupIndexKey(rb.Namespace, rb.Spec.WorkloadAffinityGroups.AffinityGroup)}, nil
	}
	return nil, nil
}

func antiAffinityGroupIndex(obj any) ([]string, error) {
	if rb, ok := obj.(*workv1alpha1.ResourceBinding); ok && rb.Namespace != "" && rb.Spec.WorkloadAffinityGroups != nil && rb.Spec.WorkloadAffinityGroups.AntiAffinityGroup != "" {
		return []string{groupIndexKey(rb.Namespace, rb.Spec.WorkloadAffinityGroups.AntiAffinityGroup)}, nil
	}
	return nil, nil
}

// groupLockStripes bounds the group locks: groups hash onto this many
// mutexes (two groups may share one; that only serializes them).
const groupLockStripes = 64

// workloadGroups is the scheduler's view of workload affinity groups: the
// index of the namespaced bindings' informer, the placements it wrote that
// the informer has not delivered yet, and one lock per group stripe. A
// binding of a group is decided and written under its groups' locks, and
// its new placement is assumed before they are released, so two workers
// never place two anti-affine workloads on one cluster (or two affine
// ones apart) because neither saw the other's write yet (Karmada's
// scheduler keeps its assigning bindings for the same reason).
type workloadGroups struct {
	indexer cache.Indexer
	locks   [groupLockStripes]sync.Mutex

	mu      sync.Mutex
	assumed map[string]*workv1alpha1.ResourceBinding // by binding key
}

func newWorkloadGroups(informer cache.SharedIndexInformer) *workloadGroups {
	indexers := cache.Indexers{}
	existing := informer.GetIndexer().GetIndexers()
	if _, ok := existing[IndexWorkloadAffinityGroup]; !ok {
		indexers[IndexWorkloadAffinityGroup] = affinityGroupIndex
	}
	if _, ok := existing[IndexWorkloadAntiAffinityGroup]; !ok {
		indexers[IndexWorkloadAntiAffinityGroup] = antiAffinityGroupIndex
	}
	if len(indexers) > 0 {
		utilruntime.Must(informer.AddIndexers(indexers))
	}
	return &workloadGroups{indexer: informer.GetIndexer(), assumed: map[string]*workv1alpha1.ResourceBinding{}}
}

// groupKeys are binding's index keys (none for a ClusterResourceBinding).
func groupKeys(b *workv1alpha1.ResourceBinding) (affinity, antiAffinity string) {
	g := b.Spec.WorkloadAffinityGroups
	if b.Namespace == "" || g == nil {
		return "", ""
	}
	if g.AffinityGroup != "" {
		affinity = groupIndexKey(b.Namespace, g.AffinityGroup)
	}
	if g.AntiAffinityGroup != "" {
		antiAffinity = groupIndexKey(b.Namespace, g.AntiAffinityGroup)
	}
	return affinity, antiAffinity
}

// lock takes the stripes of binding's groups, in order, and returns their
// release; a binding in no group takes none.
func (w *workloadGroups) lock(b *workv1alpha1.ResourceBinding) func() {
	aff, anti := groupKeys(b)
	var stripes []int
	for _, k := range []string{aff, anti} {
		if k == "" {
			continue
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(k))
		stripes = append(stripes, int(h.Sum32()%groupLockStripes))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, s := range stripes {
		w.locks[s].Lock()
	}
	return func() {
		for i := len(stripes) - 1; i >= 0; i-- {
			w.locks[stripes[i]].Unlock()
		}
	}
}

// peers are the other bindings of binding's groups, each as the scheduler
// last wrote it when the informer has not caught up. NewWorkloadAffinity
// scopes them again (namespace, group string).
func (w *workloadGroups) peers(b *workv1alpha1.ResourceBinding) []core.WorkloadPeer {
	aff, anti := groupKeys(b)
	seen := map[string]bool{workobjects.Key(b): true}
	var out []core.WorkloadPeer
	for _, q := range []struct{ index, key string }{{IndexWorkloadAffinityGroup, aff}, {IndexWorkloadAntiAffinityGroup, anti}} {
		if q.key == "" {
			continue
		}
		objs, err := w.indexer.ByIndex(q.index, q.key)
		if err != nil {
			continue // the index exists (newWorkloadGroups): not reached
		}
		for _, obj := range objs {
			rb, ok := obj.(*workv1alpha1.ResourceBinding)
			// A binding being deleted still counts: its copies run until
			// its Works are gone (the deletion requeues the peers).
			if !ok || seen[workobjects.Key(rb)] {
				continue
			}
			seen[workobjects.Key(rb)] = true
			out = append(out, core.PeerOf(w.latest(rb)))
		}
	}
	return out
}

// latest is rb or, when newer, the placement the scheduler wrote for it.
func (w *workloadGroups) latest(rb *workv1alpha1.ResourceBinding) *workv1alpha1.ResourceBinding {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.assumed[workobjects.Key(rb)]
	if !ok {
		return rb
	}
	if cmp, err := resourceversion.CompareResourceVersion(a.ResourceVersion, rb.ResourceVersion); err == nil && cmp > 0 {
		return a
	}
	return rb
}

// assume records stored, a binding the scheduler just wrote, until the
// informer delivers it (observe).
func (w *workloadGroups) assume(stored *workv1alpha1.ResourceBinding) {
	if a, anti := groupKeys(stored); a == "" && anti == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.assumed[workobjects.Key(stored)] = stored
}

// observe drops the assumption the informer has caught up with (or that a
// deletion ended).
func (w *workloadGroups) observe(rb *workv1alpha1.ResourceBinding, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := workobjects.Key(rb)
	a, ok := w.assumed[key]
	if !ok {
		return
	}
	if cmp, err := resourceversion.CompareResourceVersion(a.ResourceVersion, rb.ResourceVersion); deleted || err != nil || cmp <= 0 {
		delete(w.assumed, key)
	}
}

// placementChanged: what a group's peers decide from (where the binding
// runs, its evicted copies, its groups) differs between o and n.
func placementChanged(o, n *workv1alpha1.ResourceBinding) bool {
	return !apiequality.Semantic.DeepEqual(o.Spec.Clusters, n.Spec.Clusters) ||
		!apiequality.Semantic.DeepEqual(o.Spec.WorkloadAffinityGroups, n.Spec.WorkloadAffinityGroups) ||
		len(o.Spec.GracefulEvictionTasks) != len(n.Spec.GracefulEvictionTasks) ||
		!apiequality.Semantic.DeepEqual(o.Spec.GracefulEvictionTasks, n.Spec.GracefulEvictionTasks)
}

// requeuePeers brings back the peers of b's groups a change of b may let
// fit: those not scheduled (an anti-affine peer left a cluster, an affine
// one was placed) and Duplicated ones (which take every cluster that fits).
// A scheduled, Divided peer keeps its placement anyway.
func (c *Controller) requeuePeers(b *workv1alpha1.ResourceBinding) {
	for _, p := range c.groups.peerBindings(b) {
		scheduled := meta.FindStatusCondition(p.Status.Conditions, workv1alpha1.BindingConditionScheduled)
		if scheduled == nil || scheduled.Status != metav1.ConditionTrue || p.Spec.Placement != nil && duplicated(&p.Spec) {
			c.queue.Add(workobjects.Key(p))
		}
	}
}

// peerBindings are the cached bindings of b's groups but b.
func (w *workloadGroups) peerBindings(b *workv1alpha1.ResourceBinding) []*workv1alpha1.ResourceBinding {
	aff, anti := groupKeys(b)
	var out []*workv1alpha1.ResourceBinding
	for _, q := range []struct{ index, key string }{{IndexWorkloadAffinityGroup, aff}, {IndexWorkloadAntiAffinityGroup, anti}} {
		if q.key == "" {
			continue
		}
		objs, _ := w.indexer.ByIndex(q.index, q.key)
		for _, obj := range objs {
			if rb, ok := obj.(*workv1alpha1.ResourceBinding); ok && workobjects.Key(rb) != workobjects.Key(b) {
				out = append(out, rb)
			}
		}
	}
	return out
}

// watchWorkloadGroups keeps the assumptions and requeues peers from the
// namespaced bindings' informer.
func (c *Controller) watchWorkloadGroups(informer cache.SharedIndexInformer) {
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			ob, ok1 := o.(*workv1alpha1.ResourceBinding)
			nb, ok2 := n.(*workv1alpha1.ResourceBinding)
			if !ok1 || !ok2 {
				return
			}
			c.groups.observe(nb, false)
			if placementChanged(ob, nb) {
				c.requeuePeers(ob)
				if !apiequality.Semantic.DeepEqual(ob.Spec.WorkloadAffinityGroups, nb.Spec.WorkloadAffinityGroups) {
					c.requeuePeers(nb)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if rb, ok := obj.(*workv1alpha1.ResourceBinding); ok {
				c.groups.observe(rb, true)
				c.requeuePeers(rb)
			}
		},
	})
}

// workloadAffinity is the scheduling input of binding's groups.
func (c *Controller) workloadAffinity(b *workv1alpha1.ResourceBinding) *core.WorkloadAffinity {
	if a, anti := groupKeys(b); a == "" && anti == "" {
		return nil
	}
	return core.NewWorkloadAffinity(b.Namespace, b.Name, b.Spec.WorkloadAffinityGroups, c.groups.peers(b))
}
