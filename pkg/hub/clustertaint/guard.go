package clustertaint

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// Fleet guard modes, after Kubernetes' node lifecycle controller.
const (
	// GuardNormal: evict at the primary rate.
	GuardNormal = "Normal"
	// GuardPartialDisruption: the share of clusters that are not Ready is at
	// or above the threshold (with more than 2 clusters): evict at the
	// secondary rate.
	GuardPartialDisruption = "PartialDisruption"
	// GuardFullDisruption: no cluster is Ready. The hub assumes it is the one
	// cut off: no NoExecute taints, no evictions.
	GuardFullDisruption = "FullDisruption"
)

// GuardState is the fleet guard's verdict.
type GuardState struct {
	Mode     string
	NotReady int
	Total    int
	// RegionModes is the mode of each region that is not Normal.
	RegionModes map[string]string
	// RegionNotReady is the number of not-Ready clusters of each named
	// region that has reported clusters.
	RegionNotReady map[string]int
}

// FleetGuard judges the fleet's health and tells the eviction work how fast
// it may go. Safe for concurrent use.
type FleetGuard struct {
	threshold               float64
	primaryRate, secondRate float64

	mu    sync.RWMutex
	state GuardState
}

// NewFleetGuard returns a guard with the given unhealthy share threshold and
// eviction rates (evictions per second).
func NewFleetGuard(threshold, primaryRate, secondaryRate float64) *FleetGuard {
	return &FleetGuard{threshold: threshold, primaryRate: primaryRate, secondRate: secondaryRate, state: GuardState{Mode: GuardNormal}}
}

// State returns the current verdict.
func (g *FleetGuard) State() GuardState {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.state
}

// EvictionRate is the number of evictions per second allowed now: the primary
// rate, the secondary rate in a partial disruption, 0 in a full one.
func (g *FleetGuard) EvictionRate() float64 {
	switch g.State().Mode {
	case GuardFullDisruption:
		return 0
	case GuardPartialDisruption:
		return g.secondRate
	default:
		return g.primaryRate
	}
}

// AllowsNoExecute reports whether NoExecute taints may be added now.
func (g *FleetGuard) AllowsNoExecute() bool { return g.State().Mode != GuardFullDisruption }

// Update recomputes the verdict from clusters and reports whether it changed.
func (g *FleetGuard) Update(clusters []*clusterv1alpha1.Cluster) (GuardState, bool) {
	type count struct{ notReady, total int }
	byRegion := map[string]*count{}
	all := count{}
	for _, c := range clusters {
		// A cluster being deleted or that never reported (no Ready yet)
		// holds no workloads to protect: it does not count.
		if c.DeletionTimestamp != nil || meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) == nil {
			continue
		}
		r := byRegion[c.Spec.Region]
		if r == nil {
			r = &count{}
			byRegion[c.Spec.Region] = r
		}
		r.total++
		all.total++
		if !meta.IsStatusConditionPresentAndEqual(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady, metav1.ConditionTrue) {
			r.notReady++
			all.notReady++
		}
	}
	mode := func(c count) string {
		switch {
		case c.total > 0 && c.notReady == c.total:
			return GuardFullDisruption
		case c.total > 2 && float64(c.notReady)/float64(c.total) >= g.threshold:
			return GuardPartialDisruption
		default:
			return GuardNormal
		}
	}
	next := GuardState{Mode: mode(all), NotReady: all.notReady, Total: all.total, RegionModes: map[string]string{}, RegionNotReady: map[string]int{}}
	for region, c := range byRegion {
		if region == "" {
			continue
		}
		next.RegionNotReady[region] = c.notReady
		if m := mode(*c); m != GuardNormal {
			next.RegionModes[region] = m
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := next.Mode != g.state.Mode
	g.state = next
	return next, changed
}
