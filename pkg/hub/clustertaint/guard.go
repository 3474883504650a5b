package clustertaint

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// Fleet guard modes, after Kubernetes' node lifecycle controller's zone
// states. They are computed for the whole fleet and for each region.
const (
	// GuardNormal: evict at the primary rate.
	GuardNormal = "Normal"
	// GuardPartialDisruption: the share of clusters that are not Ready is at
	// or above the threshold (with more than 2 clusters): evict at the
	// secondary rate, or not at all in a small region.
	GuardPartialDisruption = "PartialDisruption"
	// GuardFullDisruption: no cluster is Ready. For the whole fleet the hub
	// assumes it is the one cut off: no NoExecute taints, no evictions.
	GuardFullDisruption = "FullDisruption"
)

// DefaultLargeFleetSizeThreshold is --large-fleet-size-threshold's default
// (Kubernetes' --large-cluster-size-threshold is 50 nodes; fleets are
// smaller).
const DefaultLargeFleetSizeThreshold = 10

// guardRetry is how soon a refused admission is worth asking again when
// no limiter says when: the guard is recomputed every few seconds.
const guardRetry = 5 * time.Second

// RegionState is the guard's verdict on one region.
type RegionState struct {
	Mode     string
	NotReady int
	Total    int
}

// GuardState is the fleet guard's verdict.
type GuardState struct {
	// Evaluated is false until the guard has judged the fleet once (from a
	// synced cache): until then it admits nothing.
	Evaluated bool
	Mode      string
	NotReady  int
	Total     int
	// Regions is the verdict per region. Clusters without spec.region form
	// the region "", as Kubernetes puts nodes without a zone label in the
	// zone "": they fail together as far as the hub can tell, and judging
	// them by the fleet mode would let a partial outage of the unlabelled
	// clusters hide behind healthy labelled ones.
	Regions map[string]RegionState
	// RegionModes is the mode of each named region that is not Normal.
	RegionModes map[string]string
	// RegionNotReady is the number of not-Ready clusters of each named
	// region that has reported clusters.
	RegionNotReady map[string]int
}

// FleetGuard judges the fleet's health per region and admits clusters for
// eviction: a cluster whose workloads fall due for eviction (a NoExecute
// taint, or an application failing on it) is admitted once, taking one
// token of its region's limiter; after that every workload on it may move
// without further tokens (a dead cluster's workloads move together). This
// is the node lifecycle controller's rule: rate-limit nodes, not pods.
// Safe for concurrent use.
type FleetGuard struct {
	threshold               float64
	primaryRate, secondRate float64
	largeFleet              int

	mu       sync.Mutex
	state    GuardState
	limiters map[string]*regionLimiter
	// admitted clusters and when they were admitted.
	admitted map[string]admission
}

type admission struct {
	at     time.Time
	region string
}

type regionLimiter struct {
	rate    float64
	limiter *rate.Limiter
}

// NewFleetGuard returns a guard with the given unhealthy share threshold and
// eviction rates (clusters admitted per second), with the default
// small-fleet threshold. It admits nothing before its first Update.
func NewFleetGuard(threshold, primaryRate, secondaryRate float64) *FleetGuard {
	return &FleetGuard{threshold: threshold, primaryRate: primaryRate, secondRate: secondaryRate, largeFleet: DefaultLargeFleetSizeThreshold,
		state: GuardState{Mode: GuardNormal}, limiters: map[string]*regionLimiter{}, admitted: map[string]admission{}}
}

// WithLargeFleetSizeThreshold sets the size at or below which a region in
// a partial disruption evicts nothing (Kubernetes'
// --large-cluster-size-threshold) and returns g.
func (g *FleetGuard) WithLargeFleetSizeThreshold(n int) *FleetGuard {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.largeFleet = n
	return g
}

// State returns the current verdict.
func (g *FleetGuard) State() GuardState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// RegionRate is the rate (clusters per second) at which clusters of a
// region in the given state may be admitted while the whole fleet is in
// the state fleet. Kubernetes' setLimiterInZone with its ReducedQPSFunc and
// HealthyQPSFunc, applied to the region and to the fleet, the slower
// winning:
//   - the whole fleet down: 0 (the hub is likely the one cut off);
//   - a partial disruption (of the region or of the fleet): the secondary
//     rate, or 0 when that region or fleet has at most largeFleet clusters
//     (in a small fleet "many down" is a couple of clusters, and moving
//     their load onto the rest can finish them off: 3 clusters with 2
//     silent evict nothing, whether or not they share a region);
//   - otherwise the primary rate, including for a region fully down while
//     the fleet is not: a region outage is what multi-cluster failover is
//     for, and a region of one cluster is fully down whenever that cluster
//     is; holding it would never fail such a cluster over.
func RegionRate(fleet, region RegionState, largeFleet int, primary, secondary float64) float64 {
	if fleet.Mode == GuardFullDisruption {
		return 0
	}
	rate := func(s RegionState) float64 {
		switch {
		case s.Mode != GuardPartialDisruption:
			return primary
		case s.Total <= largeFleet:
			return 0
		default:
			return secondary
		}
	}
	return min(rate(fleet), rate(region))
}

// EvictionRate is the rate of the region "" (the whole fleet when no
// cluster names a region), for callers that do not know the region.
func (g *FleetGuard) EvictionRate() float64 { return g.RegionEvictionRate("") }

// RegionEvictionRate is the admission rate of region now; 0 before the
// first evaluation.
func (g *FleetGuard) RegionEvictionRate(region string) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rateLocked(region)
}

func (g *FleetGuard) rateLocked(region string) float64 {
	if !g.state.Evaluated {
		return 0
	}
	r, ok := g.state.Regions[region]
	if !ok {
		r = RegionState{Mode: GuardNormal}
	}
	fleet := RegionState{Mode: g.state.Mode, NotReady: g.state.NotReady, Total: g.state.Total}
	return RegionRate(fleet, r, g.largeFleet, g.primaryRate, g.secondRate)
}

// AllowsNoExecute reports whether NoExecute taints may be added now: not
// before the guard has judged the fleet, nor while the whole fleet is
// down.
func (g *FleetGuard) AllowsNoExecute() bool {
	s := g.State()
	return s.Evaluated && s.Mode != GuardFullDisruption
}

// AllowsNoExecuteIn reports whether a NoExecute taint may be added to a
// cluster of region now: as AllowsNoExecute, and not while its region's
// rate is 0 (a small region in a partial disruption), or the taint would
// only wait, and count down tolerations, for an eviction the guard holds.
func (g *FleetGuard) AllowsNoExecuteIn(region string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rateLocked(region) > 0
}

// Admit asks whether cluster (of region) may be evicted from now. A
// cluster already admitted is admitted again at no cost; otherwise it takes
// one token of its region's limiter. When it may not, retryAfter says when
// to ask again.
func (g *FleetGuard) Admit(cluster, region string, now time.Time) (ok bool, retryAfter time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rt := g.rateLocked(region)
	if rt <= 0 {
		// Held (not evaluated, full or small partial disruption): not
		// even an admitted cluster moves more workloads.
		return false, guardRetry
	}
	if _, ok := g.admitted[cluster]; ok {
		return true, 0
	}
	l := g.limiters[region]
	if l == nil || l.rate != rt {
		// A new rate starts with an empty bucket unless it is the
		// primary one: the first clusters of a growing outage must not
		// spend a burst before the guard sees the rest.
		l = &regionLimiter{rate: rt, limiter: rate.NewLimiter(rate.Limit(rt), 1)}
		if rt != g.primaryRate {
			l.limiter.ReserveN(now, 1)
		}
		g.limiters[region] = l
	}
	r := l.limiter.ReserveN(now, 1)
	if !r.OK() {
		return false, guardRetry
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	g.admitted[cluster] = admission{at: now, region: region}
	return true, 0
}

// Admitted reports whether cluster is admitted for eviction.
func (g *FleetGuard) Admitted(cluster string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.admitted[cluster]
	return ok
}

// Forget drops cluster's admission: it lost its NoExecute taints (came
// back) or is gone; a new outage takes a new token.
func (g *FleetGuard) Forget(cluster string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.admitted, cluster)
}

// admissionWithoutTaint is how long an admission of a cluster without a
// NoExecute taint (application failover) lasts: the unhealthy workloads
// found together on it move together, a later wave takes a new token.
const admissionWithoutTaint = time.Minute

// Update recomputes the verdict from clusters (a synced cache's view) and
// reports whether the fleet mode or a region's mode changed. It also
// forgets admissions of clusters that are gone, and of clusters without a
// NoExecute taint admitted more than a minute ago.
func (g *FleetGuard) Update(clusters []*clusterv1alpha1.Cluster) (GuardState, bool) {
	return g.update(clusters, time.Now())
}

func (g *FleetGuard) update(clusters []*clusterv1alpha1.Cluster, now time.Time) (GuardState, bool) {
	next := Judge(clusters, g.threshold)
	tainted := map[string]bool{}
	for _, c := range clusters {
		for _, t := range c.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoExecute {
				tainted[c.Name] = true
			}
		}
	}
	present := map[string]bool{}
	for _, c := range clusters {
		present[c.Name] = c.DeletionTimestamp == nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := !g.state.Evaluated || next.Mode != g.state.Mode || len(next.Regions) != len(g.state.Regions)
	for r, s := range next.Regions {
		if g.state.Regions[r].Mode != s.Mode {
			changed = true
		}
	}
	for name, a := range g.admitted {
		if !present[name] || !tainted[name] && now.Sub(a.at) > admissionWithoutTaint {
			delete(g.admitted, name)
		}
	}
	g.state = next
	return next, changed
}

// Judge computes the guard's verdict on clusters, per region and for the
// whole fleet.
func Judge(clusters []*clusterv1alpha1.Cluster, threshold float64) GuardState {
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
		case c.total > 2 && float64(c.notReady)/float64(c.total) >= threshold:
			return GuardPartialDisruption
		default:
			return GuardNormal
		}
	}
	next := GuardState{Evaluated: true, Mode: mode(all), NotReady: all.notReady, Total: all.total,
		Regions: map[string]RegionState{}, RegionModes: map[string]string{}, RegionNotReady: map[string]int{}}
	for region, c := range byRegion {
		m := mode(*c)
		next.Regions[region] = RegionState{Mode: m, NotReady: c.notReady, Total: c.total}
		if region == "" {
			continue
		}
		next.RegionNotReady[region] = c.notReady
		if m != GuardNormal {
			next.RegionModes[region] = m
		}
	}
	return next
}
