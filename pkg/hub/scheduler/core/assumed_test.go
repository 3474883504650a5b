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

import (
	"flag"
	"fmt"
	"math/big"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

var assumedSeed = flag.Int64("assumed-seed", 0, "replay TestOvercommitBurstProperty with this seed (0: a new one)")

// cpuRoom is a cluster with cpu cores free (allocatable cpu, less
// allocatedCPU already used) and 110 pods.
func cpuRoom(cpu, allocatedCPU int64) func(*clusterv1alpha1.Cluster) {
	return func(c *clusterv1alpha1.Cluster) {
		c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"),
				corev1.ResourceCPU: *resource.NewQuantity(cpu+allocatedCPU, resource.DecimalSI)},
		}
		if allocatedCPU > 0 {
			c.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(allocatedCPU, resource.DecimalSI)}
		}
	}
}

func cpuSpec(replicas int32, cpu int64, strategy *policyv1alpha1.ReplicaSchedulingStrategy, running []workv1alpha1.TargetCluster) *workv1alpha1.ResourceBindingSpec {
	return &workv1alpha1.ResourceBindingSpec{Replicas: replicas, Clusters: running,
		ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI)}},
		Placement: &policyv1alpha1.Placement{ReplicaScheduling: strategy}}
}

// place is one step of the controller: decide with the ledger's room and
// record the result, holding the room lock as the controller does.
func place(t *testing.T, l *Assumptions, key string, generation int64, spec *workv1alpha1.ResourceBindingSpec, fleet []*clusterv1alpha1.Cluster) ([]workv1alpha1.TargetCluster, error) {
	t.Helper()
	unlock := l.LockRoom()
	defer unlock()
	res, err := Schedule(Input{Key: key, Spec: spec, Clusters: fleet, Now: now, Assumed: l.Snapshot()})
	if err != nil {
		return nil, err
	}
	l.Assume(key, spec, res.Clusters, now)
	l.Confirm(key, generation)
	return res.Clusters, nil
}

func replicasOn(ts []workv1alpha1.TargetCluster, name string) int32 {
	for _, x := range ts {
		if x.Name == name {
			return x.Replicas
		}
	}
	return 0
}

// The #6518 scenario: a burst of bindings divided by room onto clusters
// whose summaries do not change. Without the ledger each gets the same
// room; with it, the second binding sees what the first took.
func TestAssumedRoomIsSubtracted(t *testing.T) {
	fleet := []*clusterv1alpha1.Cluster{cluster("a", cpuRoom(4, 0)), cluster("b", cpuRoom(4, 0))}
	l := NewAssumptions(time.Minute, AssumptionHooks{})
	first, err := place(t, l, "ns/one", 2, cpuSpec(8, 1, dynamic(), nil), fleet)
	if err != nil || replicasOn(first, "a") != 4 || replicasOn(first, "b") != 4 {
		t.Fatalf("first: %v %v", first, err)
	}
	if _, err := place(t, l, "ns/two", 2, cpuSpec(1, 1, dynamic(), nil), fleet); err == nil {
		t.Fatalf("second binding was placed on clusters the first filled")
	}
	// Without the ledger, the stale summaries have room for it again.
	if _, err := Schedule(Input{Key: "ns/two", Spec: cpuSpec(1, 1, dynamic(), nil), Clusters: fleet, Now: now}); err != nil {
		t.Fatalf("without assumptions: %v", err)
	}
	if got := l.Snapshot()["a"]; got == nil || got.Replicas != 4 || got.MilliOf(corev1.ResourceCPU) != 4000 {
		t.Fatalf("assumed on a: %+v", got)
	}
}

func TestAssumeReplacesItsOwnAssumption(t *testing.T) {
	l := NewAssumptions(time.Minute, AssumptionHooks{})
	spec := cpuSpec(3, 1, dynamic(), targets("a", 2)) // 2 already run on a (counted by its summary)
	l.Assume("ns/x", spec, targets("a", 5), now)
	if got := l.Snapshot()["a"].Replicas; got != 3 {
		t.Fatalf("assumed %d, want the 3 added", got)
	}
	// Scheduled again before a reported: the result replaces (5 → 6 is 4
	// beyond the 2 that ran before), it does not add (3 + 1).
	spec2 := cpuSpec(6, 1, dynamic(), targets("a", 5))
	l.Assume("ns/x", spec2, targets("a", 6), now)
	if got := l.Snapshot()["a"].Replicas; got != 4 {
		t.Fatalf("assumed %d after the reschedule, want 4", got)
	}
	// Moved to b: a's assumption goes, b's is the whole 6.
	l.Assume("ns/x", cpuSpec(6, 1, dynamic(), targets("a", 6)), targets("b", 6), now)
	if l.Snapshot()["a"] != nil || l.Snapshot()["b"].Replicas != 6 {
		t.Fatalf("after the move: %+v", l.Snapshot())
	}
	// Back to its base on a (shrunk below what ran before): nothing added.
	l.Assume("ns/x", cpuSpec(2, 1, dynamic(), targets("b", 6)), targets("b", 2), now)
	if got := l.Snapshot()["b"].Replicas; got != 2 {
		t.Fatalf("b keeps its base 0, placed 2: got %d", got)
	}
	l.Assume("ns/x", cpuSpec(2, 1, dynamic(), targets("b", 2)), targets("b", 0), now)
	if l.Len() != 0 {
		t.Fatalf("entries left: %d", l.Len())
	}
}

func TestAssumptionUndo(t *testing.T) {
	l := NewAssumptions(time.Minute, AssumptionHooks{})
	l.Assume("ns/x", cpuSpec(2, 1, dynamic(), nil), targets("a", 2), now)
	undo := l.Assume("ns/x", cpuSpec(4, 1, dynamic(), targets("a", 2)), targets("a", 2, "b", 2), now)
	undo() // the binding update failed: back to the first result
	s := l.Snapshot()
	if s["a"].Replicas != 2 || s["b"] != nil {
		t.Fatalf("after undo: a %+v b %+v", s["a"], s["b"])
	}
}

func healthy(cluster string, generation int64) workv1alpha1.AggregatedStatusItem {
	return workv1alpha1.AggregatedStatusItem{ClusterName: cluster, Applied: true, Health: workv1alpha1.ResourceHealthy, ObservedGeneration: generation}
}

// An assumption is released only by a summary observed after the copy
// was up for the placement's generation.
func TestAssumptionReleasedWhenReported(t *testing.T) {
	released := map[string]int64{}
	l := NewAssumptions(time.Minute, AssumptionHooks{Released: func(reason string, n int64) { released[reason] += n }})
	l.Assume("ns/x", cpuSpec(3, 1, dynamic(), nil), targets("a", 3), now)
	// A summary before the binding update returned, and one before the
	// copy is up, release nothing: they may predate its pods.
	l.SummaryChanged("a")
	l.Confirm("ns/x", 7)
	l.ObserveBinding("ns/x", &workv1alpha1.ResourceBindingStatus{AggregatedStatus: []workv1alpha1.AggregatedStatusItem{healthy("a", 6)}})
	l.SummaryChanged("a")
	unhealthy := healthy("a", 7)
	unhealthy.Health = workv1alpha1.ResourceUnhealthy
	l.ObserveBinding("ns/x", &workv1alpha1.ResourceBindingStatus{AggregatedStatus: []workv1alpha1.AggregatedStatusItem{unhealthy}})
	l.SummaryChanged("a")
	if l.Len() != 1 {
		t.Fatalf("released before the copy was up for generation 7")
	}
	l.ObserveBinding("ns/x", &workv1alpha1.ResourceBindingStatus{AggregatedStatus: []workv1alpha1.AggregatedStatusItem{healthy("a", 7)}})
	if l.Len() != 1 {
		t.Fatalf("released on Healthy alone: the last summary may predate the pods")
	}
	l.SummaryChanged("b") // another cluster's report
	if l.Len() != 1 {
		t.Fatalf("released by another cluster's summary")
	}
	l.SummaryChanged("a")
	if l.Len() != 0 || l.Snapshot()["a"] != nil || released[ReleaseReported] != 3 {
		t.Fatalf("not released when reported: %d entries, %v", l.Len(), released)
	}
}

func TestAssumptionExpiresAndForgets(t *testing.T) {
	l := NewAssumptions(time.Minute, AssumptionHooks{})
	l.Assume("ns/x", cpuSpec(2, 1, dynamic(), nil), targets("a", 1, "b", 1), now)
	l.Assume("ns/y", cpuSpec(2, 1, dynamic(), nil), targets("a", 2), now.Add(30*time.Second))
	if n := l.Expire(now.Add(59 * time.Second)); n != 0 {
		t.Fatalf("expired %d early", n)
	}
	if n := l.Expire(now.Add(time.Minute)); n != 2 || l.Snapshot()["a"].Replicas != 2 || l.Snapshot()["b"] != nil {
		t.Fatalf("expired %d: %+v", n, l.Snapshot())
	}
	l.Assume("ns/x", cpuSpec(2, 1, dynamic(), nil), targets("a", 1, "b", 1), now)
	l.ForgetCluster("a")
	if s := l.Snapshot(); s["a"] != nil || s["b"].Replicas != 1 {
		t.Fatalf("after the cluster's deletion: %+v", s)
	}
	l.ForgetBinding("ns/x")
	if l.Len() != 0 {
		t.Fatalf("left: %d", l.Len())
	}
}

// A hub that starts assumes what its binding status does not show up.
func TestAssumptionSeed(t *testing.T) {
	l := NewAssumptions(time.Minute, AssumptionHooks{})
	spec := cpuSpec(5, 1, dynamic(), targets("a", 2, "b", 3))
	l.Seed("ns/x", 4, spec, &workv1alpha1.ResourceBindingStatus{AggregatedStatus: []workv1alpha1.AggregatedStatusItem{healthy("a", 4), healthy("b", 3)}}, now)
	if s := l.Snapshot(); s["a"] != nil || s["b"].Replicas != 3 {
		t.Fatalf("seeded: %+v", s)
	}
}

// Workers decide in parallel: under the room lock, no two divide the
// same room.
func TestAssumptionsConcurrentWorkers(t *testing.T) {
	fleet := []*clusterv1alpha1.Cluster{cluster("a", cpuRoom(10, 0)), cluster("b", cpuRoom(7, 0))}
	l := NewAssumptions(time.Minute, AssumptionHooks{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				key := fmt.Sprintf("ns/w%d-%d", w, i)
				_, _ = place(t, l, key, 1, cpuSpec(1, 1, aggregatedStrategy, nil), fleet)
			}
		}()
	}
	wg.Wait()
	s := l.Snapshot()
	if s["a"].Replicas != 10 || s["b"].Replicas != 7 {
		t.Fatalf("40 one-replica bindings onto 17 cores: a %d, b %d", s["a"].Replicas, s["b"].Replicas)
	}
}

// burstBinding is one binding of a failover burst: replicas of cpu cores
// each, some already running on survivors.
type burstBinding struct {
	key      string
	cpu      int64
	strategy *policyv1alpha1.ReplicaSchedulingStrategy
	running  map[string]int32 // on survivors before the burst (their summaries count them)
	replicas int32
}

// fits is the brute-force packing: can missing replicas of cpu cores each
// be split over clusters with the given free cores? Every split is tried.
func fits(free []int64, cpu int64, missing int32) bool {
	var try func(i int, left int32) bool
	try = func(i int, left int32) bool {
		if left == 0 {
			return true
		}
		if i == len(free) {
			return false
		}
		for x := int32(0); x <= left && int64(x)*cpu <= free[i]; x++ {
			if try(i+1, left-x) {
				return true
			}
		}
		return false
	}
	return try(0, missing)
}

// packs is the brute-force packing of a whole burst: can every binding's
// missing replicas be placed on clusters with the given free cores at
// once? Every split of every binding is tried.
func packs(free []int64, burst []burstBinding) bool {
	if len(burst) == 0 {
		return true
	}
	b := burst[0]
	missing := b.replicas
	for _, n := range b.running {
		missing -= n
	}
	var try func(i int, left int32) bool
	try = func(i int, left int32) bool {
		if i == len(free) {
			return left == 0 && packs(free, burst[1:])
		}
		for x := int32(0); x <= left && int64(x)*b.cpu <= free[i]; x++ {
			free[i] -= int64(x) * b.cpu
			ok := try(i+1, left-x)
			free[i] += int64(x) * b.cpu
			if ok {
				return true
			}
		}
		return false
	}
	return try(0, missing)
}

// TestOvercommitBurstProperty drives the real decision as the scheduler
// controller does (one binding after another, each decided with the
// ledger's room and its result assumed) over seeded random fleets of
// survivors and failover bursts that together just fit (the room is made
// from a hidden packing of the burst), on summaries that never change.
// It checks:
//   - no survivor is given more than its room;
//   - a binding left unplaced could not fit, by brute force, in the room
//     truly left at its turn (the ledger neither forgets nor double
//     counts: a binding scheduled twice replaces its assumption);
//   - when every binding's replicas have one size, the whole burst is
//     placed (the brute force packs it);
//   - without the ledger the same bursts overcommit (the test can fail).
//
// Replay a failure with -assumed-seed=N.
func TestOvercommitBurstProperty(t *testing.T) {
	seed := *assumedSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with go test ./pkg/hub/scheduler/core/ -run OvercommitBurstProperty -args -assumed-seed=%d)", seed, seed)
	r := rand.New(rand.NewSource(seed))
	overcommittedWithout, iterations := 0, 1500
	for iter := range iterations {
		survivors := 1 + r.Intn(3)
		uniform := r.Intn(2) == 0
		names := make([]string, survivors)
		for i := range names {
			names[i] = fmt.Sprintf("m%d", i)
		}
		var burst []burstBinding
		free := make([]int64, survivors) // the hidden packing's load: the room
		used := make([]int64, survivors) // what already runs, counted by the summaries
		for j := range 1 + r.Intn(4) {
			b := burstBinding{key: fmt.Sprintf("ns/w%d", j), cpu: 1, running: map[string]int32{}}
			if !uniform {
				b.cpu = 1 + int64(r.Intn(3))
			}
			b.strategy = dynamic()
			if r.Intn(2) == 0 {
				b.strategy = aggregatedStrategy
			}
			missing := int32(1 + r.Intn(4))
			for range missing {
				free[r.Intn(survivors)] += b.cpu
			}
			b.replicas = missing
			if r.Intn(3) == 0 { // it ran partly on a survivor before the failover
				i := r.Intn(survivors)
				n := int32(1 + r.Intn(2))
				b.running[names[i]] = n
				used[i] += int64(n) * b.cpu
				b.replicas += n
			}
			burst = append(burst, b)
		}
		// A binding scaled up in the middle of the burst is scheduled again.
		rescale := -1
		if r.Intn(3) == 0 {
			rescale = r.Intn(len(burst))
		}
		fleet := make([]*clusterv1alpha1.Cluster, survivors)
		for i := range fleet {
			fleet[i] = cluster(names[i], cpuRoom(free[i], used[i]))
		}
		if !packs(append([]int64(nil), free...), burst) {
			t.Fatalf("seed %d iteration %d: the hidden packing does not pack", seed, iter)
		}
		describe := func() string {
			var b strings.Builder
			fmt.Fprintf(&b, "seed %d iteration %d: free %v;", seed, iter, free)
			for _, x := range burst {
				fmt.Fprintf(&b, " %s(%d×%dcpu, running %v, %s)", x.key, x.replicas, x.cpu, x.running, x.strategy.ReplicaDivisionPreference)
			}
			return b.String()
		}
		run := func(l *Assumptions) (usage []int64, results map[string][]workv1alpha1.TargetCluster, refused []string) {
			usage = make([]int64, survivors) // cores placed by the burst
			results = map[string][]workv1alpha1.TargetCluster{}
			steps := append([]int(nil), rangeN(len(burst))...)
			if rescale >= 0 {
				steps = append(steps, rescale)
			}
			extra := int32(0)
			for s, j := range steps {
				b := burst[j]
				var current []workv1alpha1.TargetCluster
				if prev, ok := results[b.key]; ok {
					current = prev
					extra = 1 + int32(r.Intn(2))
				} else {
					for _, name := range names {
						if n := b.running[name]; n > 0 {
							current = append(current, workv1alpha1.TargetCluster{Name: name, Replicas: n})
						}
					}
				}
				replicas := b.replicas
				if s == len(burst) {
					replicas += extra
				}
				spec := cpuSpec(replicas, b.cpu, b.strategy, current)
				var have int32
				for _, x := range current {
					have += x.Replicas
				}
				left := make([]int64, survivors)
				for i := range left {
					left[i] = free[i] - usage[i]
				}
				var got []workv1alpha1.TargetCluster
				var err error
				if l != nil {
					got, err = place(t, l, b.key, int64(s+1), spec, fleet)
				} else {
					var res Result
					res, err = Schedule(Input{Key: b.key, Spec: spec, Clusters: fleet, Now: now})
					got = res.Clusters
				}
				if err != nil {
					if l != nil && fits(left, b.cpu, replicas-have) {
						t.Fatalf("%s: %s (%d missing) was left unplaced though it fits in the room left %v: %v", describe(), b.key, replicas-have, left, err)
					}
					refused = append(refused, b.key)
					continue
				}
				for i, name := range names {
					usage[i] += int64(replicasOn(got, name)-replicasOn(current, name)) * b.cpu
				}
				results[b.key] = got
			}
			return usage, results, refused
		}
		l := NewAssumptions(time.Minute, AssumptionHooks{})
		usage, results, refused := run(l)
		for i := range usage {
			if usage[i] > free[i] {
				t.Fatalf("%s: %s was given %d cores with room for %d: %v", describe(), names[i], usage[i], free[i], results)
			}
		}
		if uniform && rescale < 0 && len(refused) > 0 {
			t.Fatalf("%s: one replica size, the burst packs, but %v were left unplaced: %v", describe(), refused, results)
		}
		// The ledger holds exactly what the burst placed.
		snap := l.Snapshot()
		for i, name := range names {
			var cpu int64
			if u := snap[name]; u != nil {
				cpu = u.MilliOf(corev1.ResourceCPU) / 1000
			}
			if cpu != usage[i] {
				t.Fatalf("%s: ledger holds %d cores on %s, the burst placed %d", describe(), cpu, name, usage[i])
			}
		}
		without, _, _ := run(nil)
		for i := range without {
			if without[i] > free[i] {
				overcommittedWithout++
				break
			}
		}
	}
	t.Logf("without the ledger %d of %d bursts overcommitted a survivor", overcommittedWithout, iterations)
	if overcommittedWithout == 0 {
		t.Fatalf("no burst overcommitted without the ledger: the property cannot fail")
	}
}

func rangeN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// FuzzAssumedRoom checks the ledger's arithmetic on any summary and any
// placements: sums saturate at MaxMilli exactly as the true sums clamped
// there, and the room less what is assumed is never negative, never more
// than the room, and the room itself when nothing is assumed.
func FuzzAssumedRoom(f *testing.F) {
	f.Add("8", "2", "1", "110", "500m", []byte{3, 7, 200})
	f.Add("9P", "0", "0", "9P", "9P", []byte{255, 255, 255, 255})
	f.Add("1", "9P", "9P", "1", "1n", []byte{1})
	f.Add("4", "-1", "0", "110", "1", []byte{0, 1})
	f.Fuzz(func(t *testing.T, alloc, allocated, allocating, pods, request string, placements []byte) {
		parse := func(s string) (resource.Quantity, bool) {
			q, err := quantities.Parse(s)
			return q, err == nil
		}
		qa, ok1 := parse(alloc)
		qd, ok2 := parse(allocated)
		qg, ok3 := parse(allocating)
		qp, ok4 := parse(pods)
		qr, ok5 := parse(request)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || len(placements) > 64 {
			t.Skip()
		}
		c := cluster("a")
		c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: qa, corev1.ResourcePods: qp},
			Allocated:   corev1.ResourceList{corev1.ResourceCPU: qd},
			Allocating:  corev1.ResourceList{corev1.ResourceCPU: qg},
		}
		req := &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: qr}}
		l := NewAssumptions(time.Minute, AssumptionHooks{})
		wantReplicas, wantMilli := new(big.Int), new(big.Int)
		per := quantities.MaxMilli
		if m, err := quantities.NonNegativeMilli(&qr); err == nil {
			per = m
		}
		for i, p := range placements {
			// Replicas up to 2^31-1, some negative (a bad binding).
			n := int32(uint32(p)*uint32(p)*uint32(p)*4099) - int32(i%3)
			spec := &workv1alpha1.ResourceBindingSpec{Replicas: max(n, 1), ReplicaRequirements: req}
			l.Assume(fmt.Sprintf("ns/b%d", i), spec, []workv1alpha1.TargetCluster{{Name: "a", Replicas: n}}, now)
			if n > 0 {
				wantReplicas.Add(wantReplicas, big.NewInt(int64(n)))
				wantMilli.Add(wantMilli, new(big.Int).Mul(big.NewInt(int64(n)), big.NewInt(per)))
			}
		}
		clamp := func(v *big.Int) int64 {
			if v.Cmp(big.NewInt(quantities.MaxMilli)) > 0 {
				return quantities.MaxMilli
			}
			return v.Int64()
		}
		u := l.Snapshot()["a"]
		var gotReplicas, gotMilli int64
		if u != nil {
			gotReplicas, gotMilli = u.Replicas, u.MilliOf(corev1.ResourceCPU)
		}
		if gotReplicas != clamp(wantReplicas) || gotMilli != clamp(wantMilli) {
			t.Fatalf("assumed %d replicas %d milli, want %d %d", gotReplicas, gotMilli, clamp(wantReplicas), clamp(wantMilli))
		}
		if quantities.CheckSummary(c.Status.ResourceSummary) != nil {
			return // such a cluster has no room at all (available)
		}
		room := summaryRoom(c, req, nil)
		less := summaryRoom(c, req, u)
		if less < 0 || less > room || room < 0 {
			t.Fatalf("room %d, less assumed %d", room, less)
		}
		if u == nil && less != room {
			t.Fatalf("nothing assumed but room %d became %d", room, less)
		}
	})
}
