package core

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func topology(provider, region, zone string) func(*clusterv1alpha1.Cluster) {
	return func(c *clusterv1alpha1.Cluster) {
		c.Spec.Provider, c.Spec.Region = provider, region
		if zone != "" {
			c.Spec.Zones = []string{zone}
		}
	}
}

func spreadBy(field policyv1alpha1.SpreadFieldValue, minGroups, maxGroups int32) policyv1alpha1.SpreadConstraint {
	return policyv1alpha1.SpreadConstraint{SpreadByField: field, MinGroups: minGroups, MaxGroups: maxGroups}
}

// Karmada's spread-constraint cases, translated: Karmada ranks clusters by
// a numeric score, Flotilla by locality (clusters the workload runs on
// first, then by name), so a Karmada "higher score" is a cluster the
// binding already runs on here. Each case names the Karmada test it
// mirrors; the Flotilla-only ones (zone, provider, label, combinations
// Karmada ignores) say so.
func TestSpreadConstraintsKarmadaCases(t *testing.T) {
	r1 := func(name string) *clusterv1alpha1.Cluster { return cluster(name, topology("P1", "R1", "Z1")) }
	at := func(r, z string) func(string) *clusterv1alpha1.Cluster {
		return func(name string) *clusterv1alpha1.Cluster { return cluster(name, topology("P1", r, z)) }
	}
	r2, r3, r4, r5 := at("R2", "Z1"), at("R3", "Z1"), at("R4", "Z1"), at("R5", "Z1")
	for _, tc := range []struct {
		name        string
		constraints []policyv1alpha1.SpreadConstraint
		clusters    []*clusterv1alpha1.Cluster
		running     []string
		strategy    *policyv1alpha1.ReplicaSchedulingStrategy
		replicas    int32
		// perReplicaCPU is each replica's CPU request (room is counted in it).
		perReplicaCPU string
		want          []string
		wantErr       string
	}{
		{
			// Karmada TestSelectBestClusters "select clusters by cluster score".
			name:        "cluster constraint: the best-scored clusters up to maxGroups",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 2)},
			clusters:    []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r1("member3"), r2("member4")},
			running:     []string{"member4", "member2"},
			want:        []string{"member2", "member4"},
		},
		{
			// Karmada TestSelectBestClusters "select clusters by cluster score
			// and satisfy available resources": the lowest-scored pick is
			// swapped for the roomiest cluster left out.
			name:        "cluster constraint, Divided by room: a pick without room is swapped for the roomiest",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 2)},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", capacity("110", "60")), cluster("member2", capacity("110", "40")),
				cluster("member3", capacity("110", "80")), cluster("member4", capacity("110", "50"))},
			strategy: dynamic(), replicas: 120, perReplicaCPU: "1",
			want: []string{"member1", "member3"},
		},
		{
			// Karmada TestSelectBestClusters "... exceeded the number of
			// available clusters".
			name:        "cluster constraint: fewer clusters than minGroups",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldCluster, 7, 7)},
			clusters:    []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r1("member3"), r2("member4")},
			wantErr:     "the spread constraint by cluster needs at least 7 clusters and 4 are available",
		},
		{
			// Karmada Test_selectBestClustersByRegion "select cluster from
			// the region with the higher score".
			name: "region 1..1, cluster 2..2: the region the workload runs in",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 1, 1),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 2, 2)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3"), r2("member4"), r2("member5")},
			running:  []string{"member1", "member2"},
			want:     []string{"member1", "member2"},
		},
		{
			// Karmada Test_selectBestClustersByRegion "select cluster from
			// the region with enough clusters".
			name: "region 1..1, cluster 3..3: the region with enough clusters",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 1, 1),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 3, 3)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3"), r2("member4"), r2("member5")},
			running:  []string{"member1", "member2"},
			want:     []string{"member3", "member4", "member5"},
		},
		{
			// Karmada Test_selectBestClustersByRegion "select cluster from
			// the region with enough clusters and higher score".
			name: "region 2..2, cluster 4..5: the best two regions holding four clusters",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 2, 2),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 4, 5)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r2("member2"), r2("member3"), r2("member4"), r3("member5"), r3("member6"),
				r4("member7"), r4("member8"), r4("member9"), r4("member10")},
			running: []string{"member1", "member2"},
			want:    []string{"member1", "member2", "member3", "member4"},
		},
		{
			// Karmada Test_selectBestClustersByRegion "select cluster from
			// more than `minGroups` regions with enough clusters and higher
			// score".
			name: "region 1..3, cluster 6..8: three regions when two cannot hold six clusters",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 1, 3),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 6, 8)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r2("member2"), r2("member3"), r2("member4"), r3("member5"), r3("member6"),
				r4("member7"), r5("member8")},
			running: []string{"member1", "member5"},
			want:    []string{"member1", "member2", "member3", "member4", "member5", "member6"},
		},
		{
			// Karmada Test_selectBestClustersByRegion "no enough region".
			name: "region 3..3 with two regions",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 3, 3),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 3, 3)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3"), r2("member4"), r2("member5")},
			wantErr:  "the spread constraint by region needs at least 3 groups and 2 are available",
		},
		{
			// Karmada Test_selectBestClustersByRegion "no enough clusters".
			name: "region 2..2, cluster 6..6 with five clusters",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 2, 2),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 6, 6)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3"), r2("member4"), r2("member5")},
			wantErr:  "the spread constraint by cluster needs at least 6 clusters and 5 are available",
		},
		{
			// Karmada e2e test/e2e/suites/base/spread_by_region_test.go
			// "multiple region deployment testing" (and issue 31 item 4):
			// cluster 1..1 with region 2..2 runs on one cluster in each of
			// two regions; a region's minGroups wins over the cluster's
			// maxGroups.
			name: "cluster maxGroups 1 + region minGroups 2: one cluster in each of two regions",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 1),
				spreadBy(policyv1alpha1.SpreadByFieldRegion, 2, 2)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3")},
			running:  []string{"member1"},
			want:     []string{"member1", "member3"},
		},
		{
			// Same e2e test, second step: the policy changed to region
			// 1..1 runs on one cluster.
			name: "then region 1..1: one cluster, the one running",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 1),
				spreadBy(policyv1alpha1.SpreadByFieldRegion, 1, 1)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3")},
			running:  []string{"member1", "member3"},
			want:     []string{"member1"},
		},
		{
			// The same with Divided replicas: two regions, the replicas
			// divided between them.
			name: "cluster maxGroups 1 + region minGroups 2, Divided",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 1),
				spreadBy(policyv1alpha1.SpreadByFieldRegion, 2, 2)},
			clusters: []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3")},
			strategy: weighted(map[string]int64{"member1": 1, "member2": 1, "member3": 1}), replicas: 4,
			want: []string{"member1", "member3"},
		},
		{
			// Karmada e2e test/e2e/suites/base/scheduling_test.go
			// "Deployment propagation with label and group constraints
			// testing": cluster minGroups = maxGroups = n gives n clusters.
			name:        "cluster n..n gives n clusters",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldCluster, 2, 2)},
			clusters:    []*clusterv1alpha1.Cluster{r1("member1"), r1("member2"), r2("member3")},
			want:        []string{"member1", "member2"},
		},
		{
			// Flotilla: Karmada ignores zone when region is set; here both
			// hold: two regions, three zones.
			name: "region 2..2 + zone 3..3 + cluster ..3",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 2, 2),
				spreadBy(policyv1alpha1.SpreadByFieldZone, 3, 3), spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 3)},
			clusters: []*clusterv1alpha1.Cluster{cluster("a1", topology("", "R1", "Z1")), cluster("a2", topology("", "R1", "Z1")),
				cluster("b1", topology("", "R1", "Z2")), cluster("c1", topology("", "R2", "Z3")), cluster("d1", topology("", "R3", "Z4"))},
			want: []string{"a1", "b1", "c1"},
		},
		{
			// Flotilla: provider spreads like any other field.
			name: "provider 2..2 + cluster 2..2: one cluster per provider",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldProvider, 2, 2),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 2, 2)},
			clusters: []*clusterv1alpha1.Cluster{cluster("aws1", topology("aws", "R1", "")), cluster("aws2", topology("aws", "R2", "")),
				cluster("gcp1", topology("gcp", "R1", ""))},
			want: []string{"aws1", "gcp1"},
		},
		{
			// Flotilla: a combination no clusters can meet names the
			// constraint that fails: two regions, but every region has one
			// zone and three zones are asked with at most two regions.
			name: "region ..2 + zone 3..: cannot be met, named",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 1, 2),
				spreadBy(policyv1alpha1.SpreadByFieldZone, 3, 0), spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 0)},
			clusters: []*clusterv1alpha1.Cluster{cluster("a1", topology("", "R1", "Z1")), cluster("b1", topology("", "R2", "Z2")),
				cluster("c1", topology("", "R3", "Z3"))},
			wantErr: "the spread constraints by region (minGroups 1, maxGroups 2), zone (minGroups 3) cannot all be met together",
		},
		{
			// Flotilla: a cluster without the field belongs to no group.
			name: "clusters without a region are left out",
			constraints: []policyv1alpha1.SpreadConstraint{spreadBy(policyv1alpha1.SpreadByFieldRegion, 2, 2),
				spreadBy(policyv1alpha1.SpreadByFieldCluster, 1, 0)},
			clusters: []*clusterv1alpha1.Cluster{cluster("none"), r1("member1"), r2("member2")},
			running:  []string{"none"},
			want:     []string{"member1", "member2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			strategy, replicas := tc.strategy, tc.replicas
			if strategy == nil {
				strategy, replicas = duplicated, 2
			}
			spec := &workv1alpha1.ResourceBindingSpec{Replicas: replicas,
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: strategy, SpreadConstraints: tc.constraints}}
			if tc.perReplicaCPU != "" {
				spec.ReplicaRequirements = &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.perReplicaCPU)}}
			}
			for _, name := range tc.running {
				spec.Clusters = append(spec.Clusters, workv1alpha1.TargetCluster{Name: name, Replicas: replicas})
			}
			got, err := Schedule(Input{Key: "default/web", Spec: spec, Clusters: tc.clusters, Now: now, Fresh: true})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var sum int32
			for _, c := range got.Clusters {
				names = append(names, c.Name)
				sum += c.Replicas
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("scheduled to %v, want %v", got.Clusters, tc.want)
			}
			if strategy.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDivided && sum != replicas {
				t.Fatalf("Divided %d replicas as %v", replicas, got.Clusters)
			}
		})
	}
}

// spreadFleet is one random case of the property test.
type spreadFleet struct {
	clusters    []*clusterv1alpha1.Cluster
	running     map[string]bool
	constraints []policyv1alpha1.SpreadConstraint
}

func randomSpreadFleet(rng *rand.Rand) spreadFleet {
	pick := func(values ...string) string { return values[rng.Intn(len(values))] }
	f := spreadFleet{running: map[string]bool{}}
	for i := range 1 + rng.Intn(9) {
		name := fmt.Sprintf("m%d", i)
		c := cluster(name, topology(pick("", "p1", "p2", "p2"), pick("", "r1", "r2", "r3", "r1"), pick("", "z1", "z2", "z3", "z4")),
			capacity("110", strconv.Itoa(rng.Intn(20))))
		c.Labels = map[string]string{"tier": pick("", "gold", "silver")}
		f.clusters = append(f.clusters, c)
		if rng.Intn(3) == 0 {
			f.running[name] = true
		}
	}
	fields := []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster}, {SpreadByField: policyv1alpha1.SpreadByFieldProvider},
		{SpreadByField: policyv1alpha1.SpreadByFieldRegion}, {SpreadByField: policyv1alpha1.SpreadByFieldZone}, {SpreadByLabel: "tier"}}
	for _, sc := range fields {
		if rng.Intn(2) == 0 {
			continue
		}
		sc.MinGroups = int32(rng.Intn(4))
		if rng.Intn(3) > 0 {
			sc.MaxGroups = max(sc.MinGroups, 1) + int32(rng.Intn(3))
		}
		f.constraints = append(f.constraints, sc)
	}
	rng.Shuffle(len(f.constraints), func(i, j int) { f.constraints[i], f.constraints[j] = f.constraints[j], f.constraints[i] })
	return f
}

// satisfies reports whether set (cluster names) meets every group
// constraint's bounds, the cluster constraint's minGroups, and a cluster
// maxGroups raised to the largest group minGroups (Karmada's precedence);
// groups counts its distinct value tuples.
func satisfies(set []*clusterv1alpha1.Cluster, constraints []policyv1alpha1.SpreadConstraint) (ok bool, groups int) {
	var cluster bounds
	dims := spreadDimensions(constraints, &cluster)
	tuples := map[string]bool{}
	lo := 1
	for _, d := range dims {
		lo = max(lo, d.min)
		seen := map[string]bool{}
		for _, c := range set {
			v := d.key(c)
			if v == "" {
				return false, 0
			}
			seen[v] = true
		}
		if !d.allows(len(seen)) {
			return false, 0
		}
	}
	for _, c := range set {
		var vs []string
		for _, d := range dims {
			vs = append(vs, d.key(c))
		}
		tuples[strings.Join(vs, "/")] = true
	}
	if len(set) < cluster.min || len(set) == 0 {
		return false, 0
	}
	if cluster.max > 0 && len(set) > max(cluster.max, lo) {
		return false, 0
	}
	return true, len(tuples)
}

// Invariants of the spread selection over seeded random fleets and
// constraints (every combination of cluster, provider, region, zone and
// label, with and without bounds), against a brute force over every subset
// of the fleet:
//   - a selection meets every constraint (satisfies), and never holds more
//     clusters than the cluster constraint's maxGroups unless a group
//     constraint's minGroups needs them;
//   - it uses the fewest groups any satisfying subset uses (Karmada takes
//     as few groups as the constraints allow);
//   - an error means no subset satisfies them, and names a constraint;
//   - through Schedule, Duplicated runs on exactly the selection, Divided
//     on part of it with every replica placed, and an unsatisfiable
//     combination is a FitError (the controller keeps what runs).
//
// Replay a failure with FLOTILLA_SPREAD_SEED=<seed>.
func TestSpreadConstraintsProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("FLOTILLA_SPREAD_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (replay: FLOTILLA_SPREAD_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	satisfiable, unsatisfiable := 0, 0
	for iter := range 3000 {
		f := randomSpreadFleet(rng)
		fail := func(format string, args ...any) {
			t.Helper()
			var b strings.Builder
			for _, c := range f.clusters {
				fmt.Fprintf(&b, " %s(%s/%s/%v/%s running=%v)", c.Name, c.Spec.Provider, c.Spec.Region, c.Spec.Zones, c.Labels["tier"], f.running[c.Name])
			}
			t.Fatalf("seed %d iteration %d: %s\n constraints %+v\n fleet%s", seed, iter, fmt.Sprintf(format, args...), f.constraints, b.String())
		}
		// Brute force: the fewest groups of a satisfying subset.
		best := -1
		for mask := 1; mask < 1<<len(f.clusters); mask++ {
			var set []*clusterv1alpha1.Cluster
			for i, c := range f.clusters {
				if mask&(1<<i) != 0 {
					set = append(set, c)
				}
			}
			if ok, groups := satisfies(set, f.constraints); ok && (best < 0 || groups < best) {
				best = groups
			}
		}
		var feasible []candidate
		for _, c := range f.clusters {
			feasible = append(feasible, candidate{cluster: c, existing: f.running[c.Name]})
		}
		sort.SliceStable(feasible, func(i, j int) bool { return feasible[i].existing && !feasible[j].existing })
		selected, msg := selectBySpread(feasible, f.constraints, nil, nil)
		if msg != "" {
			unsatisfiable++
			if best >= 0 {
				fail("refused (%s) though a subset with %d groups satisfies the constraints", msg, best)
			}
			if !strings.Contains(msg, "spread constraint") {
				fail("the refusal names no constraint: %s", msg)
			}
		} else {
			satisfiable++
			var set []*clusterv1alpha1.Cluster
			for _, c := range selected {
				set = append(set, c.cluster)
			}
			ok, groups := satisfies(set, f.constraints)
			if !ok {
				fail("selected %v, which breaks the constraints", clusterNamesOf(set))
			}
			var cluster bounds
			if dims := spreadDimensions(f.constraints, &cluster); len(dims) > 0 && groups != best {
				fail("selected %v in %d groups; %d groups suffice", clusterNamesOf(set), groups, best)
			}
		}

		// End to end, Duplicated and Divided.
		for _, strategy := range []*policyv1alpha1.ReplicaSchedulingStrategy{duplicated, weighted(nil), dynamic(), aggregatedStrategy} {
			replicas := int32(1 + rng.Intn(8))
			spec := &workv1alpha1.ResourceBindingSpec{Replicas: replicas,
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: strategy, SpreadConstraints: f.constraints}}
			for _, c := range f.clusters {
				if f.running[c.Name] {
					spec.Clusters = append(spec.Clusters, workv1alpha1.TargetCluster{Name: c.Name, Replicas: 1})
				}
			}
			in := Input{Key: fmt.Sprintf("default/w%d", iter), Spec: spec, Clusters: f.clusters, Now: now, Fresh: true}
			got, err := Schedule(in)
			sel, selMsg := selectBySpread(feasible, f.constraints, roomNeed(in, spec.Placement), nil)
			if selMsg != "" {
				var fit *FitError
				if !errors.As(err, &fit) || !strings.Contains(err.Error(), selMsg) {
					fail("%s: the selection failed (%s) but Schedule said %v", strategy.ReplicaSchedulingType, selMsg, err)
				}
				continue
			}
			if err != nil {
				if strategy.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDivided {
					continue // no room for the replicas: the division says so
				}
				fail("%s: %v", strategy.ReplicaSchedulingType, err)
			}
			picked := map[string]bool{}
			for _, c := range sel {
				picked[c.cluster.Name] = true
			}
			var sum int32
			for _, tc := range got.Clusters {
				if !picked[tc.Name] {
					fail("%s: ran on %s, outside the selection %v", strategy.ReplicaSchedulingType, tc.Name, got.Clusters)
				}
				sum += tc.Replicas
			}
			if strategy == duplicated && len(got.Clusters) != len(sel) {
				fail("Duplicated ran on %v, not on the whole selection", got.Clusters)
			}
			if strategy != duplicated && sum != replicas {
				fail("Divided %d replicas as %v", replicas, got.Clusters)
			}
		}
	}
	t.Logf("%d satisfiable, %d unsatisfiable cases", satisfiable, unsatisfiable)
	if satisfiable < 300 || unsatisfiable < 300 {
		t.Fatalf("the generator is lopsided: %d satisfiable, %d unsatisfiable", satisfiable, unsatisfiable)
	}
}

func clusterNamesOf(set []*clusterv1alpha1.Cluster) []string {
	out := make([]string, len(set))
	for i, c := range set {
		out[i] = c.Name
	}
	return out
}
