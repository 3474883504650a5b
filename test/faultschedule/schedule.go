// Package faultschedule drives the real hub, against a real apiserver, with
// simulated member agents through seeded random schedules of faults and
// changes, and checks failover invariants after every step (issue 17, item
// 9). The schedule is a pure function of the seed; the hub's timing is not,
// so the invariants are bounds, never exact timings.
package faultschedule

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
)

// StepKind is what one step of a schedule does.
type StepKind string

// Step kinds.
const (
	StepKill        StepKind = "Kill"        // clusters go silent (no Lease, no status); their copies keep running
	StepRevive      StepKind = "Revive"      // clusters report again, Ready
	StepNotReady    StepKind = "NotReady"    // clusters renew their Lease but report Ready=False
	StepOutage      StepKind = "Outage"      // every cluster goes silent (fleet-wide outage)
	StepAppFault    StepKind = "AppFault"    // a cluster reports every workload Unhealthy
	StepAppHeal     StepKind = "AppHeal"     // ... and Healthy again
	StepDNSFault    StepKind = "DNSFault"    // a cluster reports ServiceDomainNameResolutionReady=False
	StepDNSHeal     StepKind = "DNSHeal"     // ... and True again
	StepCapacity    StepKind = "Capacity"    // a cluster's resourceSummary changes
	StepAddCluster  StepKind = "AddCluster"  // a new cluster registers and reports Ready
	StepDelCluster  StepKind = "DelCluster"  // a Cluster object is deleted
	StepHubRestart  StepKind = "HubRestart"  // the hub process stops and starts again
	StepImage       StepKind = "Image"       // a template's image changes
	StepReplicas    StepKind = "Replicas"    // a template's replicas change
	StepPolicy      StepKind = "Policy"      // a workload's PropagationPolicy changes variant
	StepWaitHistory StepKind = "WaitHistory" // nothing happens for longer than the eviction-history TTL
)

// Step is one step of a schedule.
type Step struct {
	Kind     StepKind
	Clusters []string // clusters the step involves
	Workload int      // workload index for template and policy steps; -1 otherwise
	Value    int      // new replicas, capacity (pods), image version or policy variant
	Region   string   // region of an added cluster
	// QuickMillis > 0 starts the next step this many milliseconds after
	// this one, without waiting for the fleet to settle, so that faults
	// and changes overlap the hub's reactions to earlier ones.
	QuickMillis int
}

func (s Step) String() string {
	var b strings.Builder
	b.WriteString(string(s.Kind))
	if len(s.Clusters) > 0 {
		fmt.Fprintf(&b, " %s", strings.Join(s.Clusters, ","))
	}
	if s.Workload >= 0 {
		fmt.Fprintf(&b, " w%d", s.Workload)
	}
	switch s.Kind {
	case StepReplicas:
		fmt.Fprintf(&b, " replicas=%d", s.Value)
	case StepCapacity:
		fmt.Fprintf(&b, " pods=%d", s.Value)
	case StepImage:
		fmt.Fprintf(&b, " image=v%d", s.Value)
	case StepPolicy:
		fmt.Fprintf(&b, " variant=%s", Variant(s.Value))
	case StepAddCluster:
		fmt.Fprintf(&b, " region=%q", s.Region)
		if s.Value == 1 {
			b.WriteString(" (its agent never reports)")
		}
	}
	if s.QuickMillis > 0 {
		fmt.Fprintf(&b, " (next after %dms, unsettled)", s.QuickMillis)
	}
	return b.String()
}

// Variant is a kind of PropagationPolicy a workload can have.
type Variant int

// Policy variants.
const (
	VariantDuplicatedNames     Variant = iota // Duplicated over a clusterNames list
	VariantStaticWeights                      // Divided, static weights over a clusterNames list
	VariantDynamicWeights                     // Divided, dynamic weights (AvailableReplicas), every cluster
	VariantAggregated                         // Divided Aggregated, every cluster
	VariantAffinities                         // clusterAffinities: primary region, then backup everything
	VariantPinned                             // Duplicated, clusterNames: [one cluster]
	VariantSpreadRegions                      // Duplicated with a region spread constraint (maxGroups 2) and a cluster one (maxGroups 4)
	VariantAppFailoverGraceful                // Divided static weights + application failover Gracefully
	VariantAppFailoverDirect                  // Duplicated over a list + application failover Directly
	numVariants
)

func (v Variant) String() string {
	return [...]string{"DuplicatedNames", "StaticWeights", "DynamicWeights", "Aggregated", "Affinities",
		"Pinned", "SpreadRegions", "AppFailoverGraceful", "AppFailoverDirect"}[v]
}

// ClusterSpec is a simulated member of the initial fleet.
type ClusterSpec struct {
	Name   string
	Region string
	Pods   int64
}

// WorkloadSpec is a Deployment template and its policy.
type WorkloadSpec struct {
	Replicas int
	Variant  Variant
	Names    []string // the clusterNames list of list-based variants
	Region   string   // the primary region of VariantAffinities
}

// Schedule is a fleet, workloads and the steps to run.
type Schedule struct {
	Seed      int64
	Clusters  []ClusterSpec
	Workloads []WorkloadSpec
	Steps     []Step
}

// Regions a cluster may be in ("" is no region).
var regions = []string{"eu", "us", ""}

// Capacities (pods) a cluster may report: full, tight, roomy.
var capacities = []int64{0, 4, 200}

// Generate returns the schedule of seed: nClusters (3–8 if 0), nWorkloads
// (5–12 if 0), nSteps steps. It depends on nothing but its arguments.
func Generate(seed int64, nClusters, nWorkloads, nSteps int) Schedule {
	r := rand.New(rand.NewSource(seed))
	if nClusters == 0 {
		nClusters = 3 + r.Intn(6)
	}
	if nWorkloads == 0 {
		nWorkloads = 5 + r.Intn(8)
	}
	s := Schedule{Seed: seed}
	for i := range nClusters {
		s.Clusters = append(s.Clusters, ClusterSpec{Name: fmt.Sprintf("m%d", i+1), Region: regions[i%len(regions)], Pods: capacities[1+r.Intn(2)]})
	}
	g := &gen{r: r, next: nClusters + 1}
	for _, c := range s.Clusters {
		g.clusters = append(g.clusters, c.Name)
		g.regionOf = appendMap(g.regionOf, c.Name, c.Region)
	}
	for range nWorkloads {
		s.Workloads = append(s.Workloads, g.workload())
	}
	g.dead = map[string]bool{}
	g.faulty = map[string]bool{}
	g.dnsDown = map[string]bool{}
	g.image = make([]int, nWorkloads)
	for i := range g.image {
		g.image[i] = 1
	}
	g.nWorkloads = nWorkloads
	for len(s.Steps) < nSteps {
		steps := g.step()
		if r.Intn(5) == 0 {
			steps[len(steps)-1].QuickMillis = 200 + r.Intn(2000)
		}
		s.Steps = append(s.Steps, steps...)
	}
	s.Steps = s.Steps[:nSteps]
	// A schedule ends with every cluster back, so the last checks see a
	// fleet that can run everything.
	if len(g.deadList()) > 0 {
		s.Steps = append(s.Steps, Step{Kind: StepRevive, Clusters: g.deadList(), Workload: -1})
	}
	return s
}

func appendMap(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// gen is the generator's model of the fleet, so that steps make sense
// (revive only what is dead, never delete below three clusters).
type gen struct {
	r          *rand.Rand
	clusters   []string
	regionOf   map[string]string
	dead       map[string]bool // silent or not ready
	faulty     map[string]bool
	dnsDown    map[string]bool
	image      []int
	nWorkloads int
	next       int
}

func (g *gen) pick(n int) []string {
	c := slices.Clone(g.clusters)
	g.r.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	out := c[:min(n, len(c))]
	slices.Sort(out)
	return out
}

func (g *gen) workload() WorkloadSpec {
	w := WorkloadSpec{Replicas: 1 + g.r.Intn(6), Variant: Variant(g.r.Intn(int(numVariants)))}
	g.fill(&w)
	return w
}

// fill sets the cluster list and region a variant needs.
func (g *gen) fill(w *WorkloadSpec) {
	switch w.Variant {
	case VariantPinned:
		w.Names = g.pick(1)
	case VariantDuplicatedNames, VariantStaticWeights, VariantAppFailoverGraceful, VariantAppFailoverDirect:
		w.Names = g.pick(2 + g.r.Intn(2))
	}
	w.Region = regions[g.r.Intn(2)]
}

func (g *gen) alive() []string {
	var out []string
	for _, c := range g.clusters {
		if !g.dead[c] {
			out = append(out, c)
		}
	}
	return out
}

func (g *gen) deadList() []string {
	var out []string
	for _, c := range g.clusters {
		if g.dead[c] {
			out = append(out, c)
		}
	}
	return out
}

func (g *gen) step() []Step {
	r := g.r
	none := -1
	alive, dead := g.alive(), g.deadList()
	switch k := r.Intn(100); {
	case k < 18 && len(alive) > 1: // kill one or several, never all (that is Outage)
		n := 1
		if r.Intn(3) == 0 {
			n = 1 + r.Intn(len(alive)-1)
		}
		r.Shuffle(len(alive), func(i, j int) { alive[i], alive[j] = alive[j], alive[i] })
		victims := slices.Clone(alive[:n])
		slices.Sort(victims)
		kind := StepKill
		if r.Intn(4) == 0 {
			kind = StepNotReady
		}
		for _, c := range victims {
			g.dead[c] = true
		}
		return []Step{{Kind: kind, Clusters: victims, Workload: none}}
	case k < 32 && len(dead) > 0:
		n := 1 + r.Intn(len(dead))
		back := dead[:n]
		for _, c := range back {
			g.dead[c] = false
		}
		return []Step{{Kind: StepRevive, Clusters: back, Workload: none}}
	case k < 36:
		// A fleet-wide outage, then the fleet comes back.
		all := slices.Clone(g.clusters)
		for _, c := range all {
			g.dead[c] = false
		}
		return []Step{{Kind: StepOutage, Clusters: all, Workload: none}, {Kind: StepRevive, Clusters: all, Workload: none}}
	case k < 42:
		return []Step{{Kind: StepHubRestart, Workload: none}}
	case k < 54:
		w := r.Intn(g.nWorkloads)
		g.image[w]++
		return []Step{{Kind: StepImage, Workload: w, Value: g.image[w]}}
	case k < 62:
		return []Step{{Kind: StepReplicas, Workload: r.Intn(g.nWorkloads), Value: 1 + r.Intn(8)}}
	case k < 72:
		return []Step{{Kind: StepPolicy, Workload: r.Intn(g.nWorkloads), Value: r.Intn(int(numVariants))}}
	case k < 78:
		c := g.pick(1)
		if g.faulty[c[0]] {
			g.faulty[c[0]] = false
			return []Step{{Kind: StepAppHeal, Clusters: c, Workload: none}}
		}
		g.faulty[c[0]] = true
		return []Step{{Kind: StepAppFault, Clusters: c, Workload: none}}
	case k < 81:
		c := g.pick(1)
		if g.dnsDown[c[0]] {
			g.dnsDown[c[0]] = false
			return []Step{{Kind: StepDNSHeal, Clusters: c, Workload: none}}
		}
		g.dnsDown[c[0]] = true
		return []Step{{Kind: StepDNSFault, Clusters: c, Workload: none}}
	case k < 86:
		return []Step{{Kind: StepCapacity, Clusters: g.pick(1), Workload: none, Value: int(capacities[r.Intn(len(capacities))])}}
	case k < 90 && len(g.clusters) < 8:
		name := fmt.Sprintf("m%d", g.next)
		g.next++
		region := regions[r.Intn(len(regions))]
		g.clusters = append(g.clusters, name)
		g.regionOf[name] = region
		// One new cluster in three never reports until revived.
		silent := 0
		if r.Intn(3) == 0 {
			silent = 1
			g.dead[name] = true
		}
		return []Step{{Kind: StepAddCluster, Clusters: []string{name}, Workload: none, Region: region, Value: silent}}
	case k < 95 && len(g.clusters) > 3:
		c := g.pick(1)
		g.clusters = slices.DeleteFunc(g.clusters, func(n string) bool { return n == c[0] })
		delete(g.dead, c[0])
		delete(g.faulty, c[0])
		delete(g.dnsDown, c[0])
		return []Step{{Kind: StepDelCluster, Clusters: c, Workload: none}}
	default:
		return []Step{{Kind: StepWaitHistory, Workload: none}}
	}
}

// PolicyWorkload returns the workload spec a StepPolicy sets: the variant of
// the step, with cluster lists drawn from the step's own random stream so
// that the schedule stays a function of the seed.
func PolicyWorkload(seed int64, stepIndex int, variant Variant, clusters []string, replicas int) WorkloadSpec {
	g := &gen{r: rand.New(rand.NewSource(seed*1000003 + int64(stepIndex))), clusters: clusters}
	w := WorkloadSpec{Replicas: replicas, Variant: variant}
	g.fill(&w)
	return w
}
