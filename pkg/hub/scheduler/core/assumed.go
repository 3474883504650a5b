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

package core

// Overcommit protection (Karmada v1.18 SchedulingOvercommitProtection,
// asked for in Karmada issue #6518): a cluster's room comes from the
// resource summary its agent last reported, which does not yet count what
// the scheduler placed there a moment ago. In a failover burst every
// binding would be divided by the same stale room and a survivor given
// many times what it has. Like kube-scheduler's assume cache, the
// scheduler records each placement it makes as "assumed" on the cluster
// and subtracts it from the cluster's room until the cluster reports it.
//
// An assumption (binding, cluster) is what the placement added to what the
// binding ran there before (its base, which the summary already counts):
// replicas (one pod each) times the binding's per-replica requests. It is
//
//   - replaced, never added to, when the binding is scheduled again (the
//     base stays what it was, the placed replicas are the new result; a
//     cluster given no more than its base, or dropped, is released);
//   - released as Reported once the cluster has reported it: the binding's
//     status shows the copy Healthy for the binding generation that carried
//     the placement (its pods exist: they are counted as allocated or
//     allocating by any summary computed from then on), and after that a
//     changed resource summary of the cluster is observed. A summary
//     observed before the copy was up may have been computed before its
//     pods existed, so it releases nothing: it is how #6518 happened;
//   - released when the binding or the cluster is deleted;
//   - released as Expired after the TTL (Karmada's DefaultAssumptionTTL,
//     5 minutes): a copy that never becomes Healthy (an image that does not
//     pull) must not hold room for ever. Its pods, if any, are counted by
//     the summary anyway.
//
// Every value is bounded (quantities.MaxMilli, sums saturate there) so
// that subtracting it from a summary's room, itself within [0, MaxMilli],
// can neither wrap nor go negative: a member that lies in its summary
// moves only its own room, within what it claims.

import (
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// DefaultAssumptionTTL is how long an assumption holds room at most
// (Karmada's DefaultAssumptionTTL).
const DefaultAssumptionTTL = 5 * time.Minute

// Why an assumption was released, the label of the release metric.
const (
	ReleaseReported       = "Reported"
	ReleaseRescheduled    = "Rescheduled"
	ReleaseBindingDeleted = "BindingDeleted"
	ReleaseClusterDeleted = "ClusterDeleted"
	ReleaseExpired        = "Expired"
	ReleaseUndone         = "Undone"
)

// AssumedUsage is what the scheduler has placed on one cluster that the
// cluster has not reported yet: replicas (one pod each) and the resources
// they request, in milli-units. Every value is within [0,
// quantities.MaxMilli]. It is never changed once made.
type AssumedUsage struct {
	Replicas int64
	// Milli is each requested resource's sum (a few: a slice, not a map,
	// so that a ledger change allocates little).
	Milli []ResourceMilli
}

// ResourceMilli is an amount of one resource in milli-units.
type ResourceMilli struct {
	Name  corev1.ResourceName
	Milli int64
}

// MilliOf is u's sum for resource name (0 when none).
func (u *AssumedUsage) MilliOf(name corev1.ResourceName) int64 {
	if u == nil {
		return 0
	}
	for _, m := range u.Milli {
		if m.Name == name {
			return m.Milli
		}
	}
	return 0
}

// Assumed is each cluster's AssumedUsage (clusters without any are
// absent). It is never changed once made: a decision may read it without
// a lock.
type Assumed map[string]*AssumedUsage

// AssumptionHooks are told of the ledger's changes (metrics); they run
// under the ledger's lock and must be quick.
type AssumptionHooks struct {
	// Changed gets a cluster's assumed replicas after each change.
	Changed func(cluster string, replicas int64)
	// Released counts released assumptions and their replicas by reason.
	Released func(reason string, replicas int64)
}

// Assumptions is the ledger of assumed placements. It is safe for
// concurrent use. A nil *Assumptions assumes nothing.
type Assumptions struct {
	ttl   time.Duration
	hooks AssumptionHooks

	// room serializes the decisions that read room with the recording of
	// their result (LockRoom).
	room sync.Mutex

	mu       sync.Mutex
	bindings map[string]map[string]*assumption // binding key → cluster → entry
	clusters map[string]*clusterLedger
	// snapshot is the Assumed of the entries, rebuilt on each change.
	snapshot atomic.Pointer[Assumed]
}

// unconfirmed is the generation of an entry whose binding update has not
// returned yet: no status can report it.
const unconfirmed = math.MaxInt64

type assumption struct {
	cluster      string
	base, placed int32
	perReplica   []ResourceMilli // milli-units, each within [0, MaxMilli]
	generation   int64           // the binding generation that carries the placement
	at           time.Time       // made or last replaced (hub clock)
	up           bool            // the copy was seen Healthy for generation
	upSeq        uint64          // the cluster's summary sequence when it was
}

func (a *assumption) replicas() int64 { return max(int64(a.placed)-int64(a.base), 0) }

type clusterLedger struct {
	seq     uint64 // resource summary changes observed
	entries map[string]*assumption
	usage   *AssumedUsage
}

// NewAssumptions returns an empty ledger whose entries expire after ttl;
// ttl 0 turns overcommit protection off (nil is returned).
func NewAssumptions(ttl time.Duration, hooks AssumptionHooks) *Assumptions {
	if ttl <= 0 {
		return nil
	}
	a := &Assumptions{ttl: ttl, hooks: hooks,
		bindings: map[string]map[string]*assumption{}, clusters: map[string]*clusterLedger{}}
	a.snapshot.Store(&Assumed{})
	return a
}

// Snapshot is the assumed usage of every cluster now.
func (a *Assumptions) Snapshot() Assumed {
	if a == nil {
		return nil
	}
	return *a.snapshot.Load()
}

// LockRoom is held by a decision that reads room from its Snapshot until
// its result is recorded (Assume), so that two workers cannot divide the
// same room. It returns the unlock.
func (a *Assumptions) LockRoom() func() {
	if a == nil {
		return func() {}
	}
	a.room.Lock()
	return a.room.Unlock
}

// UsesRoom reports whether the binding's replicas are divided by room
// (Divided, by dynamic weight or Aggregated), so that its decision reads
// the clusters' room.
func UsesRoom(spec *workv1alpha1.ResourceBindingSpec) bool {
	if spec == nil || spec.Placement == nil || spec.Replicas <= 0 {
		return false
	}
	return roomNeed(Input{Spec: spec}, spec.Placement) != nil
}

// Running is what the binding runs on cluster according to spec: its
// target's replicas, or, for a cluster the scheduler is removing, the
// replicas its open task keeps there.
func Running(spec *workv1alpha1.ResourceBindingSpec, cluster string) int32 {
	for _, t := range spec.Clusters {
		if t.Name == cluster {
			return t.Replicas
		}
	}
	if task := rescheduledFrom(spec, cluster); task != nil && task.Replicas != nil {
		return *task.Replicas
	}
	return 0
}

// perReplica is the milli-units one replica of spec requests, each within
// [0, MaxMilli]: a value out of range counts as MaxMilli (it takes all
// room). Pods are counted by replicas, not here.
func perReplica(spec *workv1alpha1.ResourceBindingSpec) []ResourceMilli {
	if spec.ReplicaRequirements == nil || len(spec.ReplicaRequirements.ResourceRequest) == 0 {
		return nil
	}
	out := make([]ResourceMilli, 0, len(spec.ReplicaRequirements.ResourceRequest))
	for name, q := range spec.ReplicaRequirements.ResourceRequest {
		if name == corev1.ResourcePods {
			continue
		}
		m, err := quantities.NonNegativeMilli(&q)
		if err != nil {
			m = quantities.MaxMilli
		}
		if m > 0 {
			out = append(out, ResourceMilli{Name: name, Milli: m})
		}
	}
	return out
}

// Assume records what result places for the binding key, whose spec
// (before the result) is before, replacing what was assumed for it: on
// each cluster the replicas beyond what ran there before the first
// unreported placement. It returns the undo, to call when the result is
// not written.
func (a *Assumptions) Assume(key string, before *workv1alpha1.ResourceBindingSpec, result []workv1alpha1.TargetCluster, now time.Time) (undo func()) {
	if a == nil || before == nil {
		return func() {}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.bindings[key]
	if len(old) == 0 && (before.Replicas <= 0 || len(result) == 0) {
		return func() {} // nothing requested, nothing assumed before (a Duplicated ConfigMap)
	}
	saved := make(map[string]assumption, len(old))
	for c, e := range old {
		saved[c] = *e
	}
	per := perReplica(before)
	touched := map[string]bool{}
	next := map[string]*assumption{}
	for _, t := range result {
		placed := max(t.Replicas, 0)
		if before.Replicas <= 0 {
			placed = 0 // no replicas, nothing requested
		}
		if e := old[t.Name]; e != nil {
			if e.placed == placed {
				next[t.Name] = e
				continue
			}
			touched[t.Name] = true
			if placed <= e.base {
				a.release(key, e, ReleaseRescheduled)
				continue
			}
			updated := *e
			updated.placed, updated.perReplica, updated.generation, updated.at, updated.up = placed, per, unconfirmed, now, false
			next[t.Name] = &updated
			continue
		}
		base := Running(before, t.Name)
		if placed <= base {
			continue
		}
		touched[t.Name] = true
		next[t.Name] = &assumption{cluster: t.Name, base: max(base, 0), placed: placed, perReplica: per, generation: unconfirmed, at: now}
	}
	for c, e := range old {
		if _, kept := next[c]; !kept && !touched[c] {
			touched[c] = true
			a.release(key, e, ReleaseRescheduled)
		}
	}
	if len(touched) == 0 {
		return func() {}
	}
	a.setEntries(key, next, touched)
	return func() { a.restore(key, saved) }
}

// restore puts the binding's entries back as saved (an unwritten result).
func (a *Assumptions) restore(key string, saved map[string]assumption) {
	a.mu.Lock()
	defer a.mu.Unlock()
	touched := map[string]bool{}
	for c, e := range a.bindings[key] {
		touched[c] = true
		if a.hooks.Released != nil {
			a.hooks.Released(ReleaseUndone, e.replicas())
		}
	}
	next := make(map[string]*assumption, len(saved))
	for c, e := range saved {
		e := e
		next[c] = &e
		touched[c] = true
	}
	a.setEntries(key, next, touched)
}

// setEntries makes next the binding's entries and recomputes the touched
// clusters. Under a.mu.
func (a *Assumptions) setEntries(key string, next map[string]*assumption, touched map[string]bool) {
	for c := range touched {
		cl := a.clusters[c]
		if cl != nil {
			delete(cl.entries, key)
		}
		if e := next[c]; e != nil {
			if cl == nil {
				cl = &clusterLedger{entries: map[string]*assumption{}}
				a.clusters[c] = cl
			}
			cl.entries[key] = e
		}
	}
	if len(next) == 0 {
		delete(a.bindings, key)
	} else {
		a.bindings[key] = next
	}
	a.recompute(touched)
}

// release drops entry e of key (its cluster is recomputed by the caller).
// Under a.mu.
func (a *Assumptions) release(key string, e *assumption, reason string) {
	if cl := a.clusters[e.cluster]; cl != nil {
		delete(cl.entries, key)
	}
	if m := a.bindings[key]; m != nil && m[e.cluster] == e {
		delete(m, e.cluster)
		if len(m) == 0 {
			delete(a.bindings, key)
		}
	}
	if a.hooks.Released != nil {
		a.hooks.Released(reason, e.replicas())
	}
}

// recompute sums the touched clusters' entries and publishes a new
// snapshot: the old one with the touched clusters changed (a clone costs
// far less than a new map of every cluster). Under a.mu.
func (a *Assumptions) recompute(touched map[string]bool) {
	snap := maps.Clone(*a.snapshot.Load())
	if snap == nil {
		snap = Assumed{}
	}
	// One allocation for every touched cluster's usage and one for their
	// resources: a wide placement touches many clusters.
	usages := make([]AssumedUsage, 0, len(touched))
	var resources []ResourceMilli
	for c := range touched {
		cl := a.clusters[c]
		if cl == nil || len(cl.entries) == 0 {
			// A cluster without entries needs no summary sequence: the
			// next entry's up mark is relative to the sequence then.
			delete(a.clusters, c)
			delete(snap, c)
			if a.hooks.Changed != nil {
				a.hooks.Changed(c, 0)
			}
			continue
		}
		usages = append(usages, AssumedUsage{})
		u := &usages[len(usages)-1]
		start := len(resources)
		for _, e := range cl.entries {
			n := e.replicas()
			u.Replicas = addMilli(u.Replicas, n)
		next:
			for _, per := range e.perReplica {
				add := mulMilli(n, per.Milli)
				for i := start; i < len(resources); i++ {
					if resources[i].Name == per.Name {
						resources[i].Milli = addMilli(resources[i].Milli, add)
						continue next
					}
				}
				resources = append(resources, ResourceMilli{Name: per.Name, Milli: add})
			}
		}
		// Cap-limited: a later append never writes into it.
		u.Milli = resources[start:len(resources):len(resources)]
		cl.usage = u
		snap[c] = u
		if a.hooks.Changed != nil {
			a.hooks.Changed(c, u.Replicas)
		}
	}
	a.snapshot.Store(&snap)
}

// Confirm records the generation the binding update that carries key's
// placement was stored with: a status for it (or a later one) can report
// the placement.
func (a *Assumptions) Confirm(key string, generation int64) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.bindings[key] {
		if e.generation == unconfirmed {
			e.generation = generation
		}
	}
}

// ObserveBinding marks the binding's entries whose copy status shows
// Healthy for the placement's generation (or a later one) as up: the next
// resource summary change of their cluster releases them.
func (a *Assumptions) ObserveBinding(key string, status *workv1alpha1.ResourceBindingStatus) {
	if a == nil || status == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	entries := a.bindings[key]
	if len(entries) == 0 {
		return
	}
	for i := range status.AggregatedStatus {
		item := &status.AggregatedStatus[i]
		e := entries[item.ClusterName]
		if e == nil || e.up || e.generation == unconfirmed || item.ObservedGeneration < e.generation ||
			!item.Applied || item.Health != workv1alpha1.ResourceHealthy {
			continue
		}
		e.up = true
		if cl := a.clusters[e.cluster]; cl != nil {
			e.upSeq = cl.seq
		}
	}
}

// SummaryChanged records that a new resource summary of cluster was
// observed: the entries whose copy was up before it are reported.
func (a *Assumptions) SummaryChanged(cluster string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cl := a.clusters[cluster]
	if cl == nil {
		// Remember the sequence only for clusters with entries; a new
		// entry's up mark reads it then.
		return
	}
	cl.seq++
	released := false
	for key, e := range cl.entries {
		if e.up && e.upSeq < cl.seq {
			a.release(key, e, ReleaseReported)
			released = true
		}
	}
	if released {
		a.recompute(map[string]bool{cluster: true})
	}
}

// ForgetBinding releases the deleted binding's entries.
func (a *Assumptions) ForgetBinding(key string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	touched := map[string]bool{}
	for c, e := range a.bindings[key] {
		touched[c] = true
		a.release(key, e, ReleaseBindingDeleted)
	}
	if len(touched) > 0 {
		a.recompute(touched)
	}
}

// ForgetCluster releases the entries of the deleted cluster.
func (a *Assumptions) ForgetCluster(cluster string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cl := a.clusters[cluster]
	if cl == nil {
		return
	}
	for key, e := range cl.entries {
		a.release(key, e, ReleaseClusterDeleted)
	}
	a.recompute(map[string]bool{cluster: true})
}

// Expire releases the entries made or replaced a TTL or more before now,
// and says how many.
func (a *Assumptions) Expire(now time.Time) int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	touched := map[string]bool{}
	n := 0
	for key, entries := range a.bindings {
		for c, e := range entries {
			if !now.Before(e.at.Add(a.ttl)) {
				touched[c] = true
				a.release(key, e, ReleaseExpired)
				n++
			}
		}
	}
	if n > 0 {
		a.recompute(touched)
	}
	return n
}

// Seed assumes, for a hub that has just started, the whole placement of a
// binding on every cluster whose copy status does not show it Healthy for
// the binding's generation: placements the previous hub made in its last
// moments are not yet in the summaries, and nothing tells how much of them
// is (base 0: it may count twice what already runs, for a TTL at most,
// which is the safe side).
func (a *Assumptions) Seed(key string, generation int64, spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus, now time.Time) {
	if a == nil || spec == nil || spec.Replicas <= 0 {
		return
	}
	reported := func(cluster string) bool {
		for i := range status.AggregatedStatus {
			item := &status.AggregatedStatus[i]
			if item.ClusterName == cluster {
				return item.Applied && item.Health == workv1alpha1.ResourceHealthy && item.ObservedGeneration >= generation
			}
		}
		return false
	}
	per := perReplica(spec)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.bindings[key]) > 0 {
		return
	}
	next := map[string]*assumption{}
	touched := map[string]bool{}
	for _, t := range spec.Clusters {
		if t.Replicas <= 0 || reported(t.Name) {
			continue
		}
		next[t.Name] = &assumption{cluster: t.Name, placed: t.Replicas, perReplica: per, generation: generation, at: now}
		touched[t.Name] = true
	}
	if len(next) > 0 {
		a.setEntries(key, next, touched)
	}
}

// Len is the number of entries (tests, metrics).
func (a *Assumptions) Len() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, m := range a.bindings {
		n += len(m)
	}
	return n
}

// addMilli adds two values within [0, MaxMilli], saturating at MaxMilli.
func addMilli(a, b int64) int64 {
	a, b = clampMilli(a), clampMilli(b)
	if a > quantities.MaxMilli-b {
		return quantities.MaxMilli
	}
	return a + b
}

// mulMilli multiplies two values within [0, MaxMilli], saturating at
// MaxMilli.
func mulMilli(a, b int64) int64 {
	a, b = clampMilli(a), clampMilli(b)
	if a == 0 || b == 0 {
		return 0
	}
	if a > quantities.MaxMilli/b {
		return quantities.MaxMilli
	}
	return a * b
}

func clampMilli(v int64) int64 { return min(max(v, 0), quantities.MaxMilli) }

// lessAssumed is free (within [0, MaxMilli]) less assumed, never below 0.
func lessAssumed(free, assumed int64) int64 {
	return max(clampMilli(free)-clampMilli(assumed), 0)
}
