package failback

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusteraffinity"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
	"github.com/flotilla-io/flotilla/pkg/rollout"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Defaults of failover.failback, as the API's (a binding written before
// the CRD defaulted them, or by hand, may carry zeros).
const (
	DefaultStabilizationWindowSeconds = 300
	DefaultMaxConcurrent              = 5
)

// Action is what the controller does with a binding.
type Action string

// Actions.
const (
	// ActionNone: failback is off, or the workload was not failed over
	// (or no longer can return anywhere): nothing to wait for.
	ActionNone Action = "None"
	// ActionWaitTask: the binding has an open graceful eviction task or a
	// reschedule not yet made; a failback now would stack on it.
	ActionWaitTask Action = "WaitTask"
	// ActionWaitCluster: a cluster it would return to is not Ready or has
	// a taint the placement does not tolerate; its change re-enqueues.
	ActionWaitCluster Action = "WaitCluster"
	// ActionWaitWindow: every such cluster is fit, but not yet for the
	// whole stabilization window; After says when it will have been.
	ActionWaitWindow Action = "WaitWindow"
	// ActionWaitGuard: the fleet guard sees a disruption somewhere.
	ActionWaitGuard Action = "WaitGuard"
	// ActionWaitLimit: maxConcurrent failbacks are already in progress.
	ActionWaitLimit Action = "WaitLimit"
	// ActionWaitFit: the scheduler would not place the workload on any
	// cluster it would return to (Input.Schedule): a failback now would
	// only land where it runs again. Re-checked on cluster changes and
	// every recheck period, without writes.
	ActionWaitFit Action = "WaitFit"
	// ActionStart: fail back now, to Clusters.
	ActionStart Action = "Start"
)

// Input is what the decision needs, all read from caches.
type Input struct {
	Spec   *workv1alpha1.ResourceBindingSpec
	Status *workv1alpha1.ResourceBindingStatus
	// Clusters are every cluster the hub knows, by name.
	Clusters map[string]*clusterv1alpha1.Cluster
	Guard    clustertaint.GuardState
	// InProgress is the number of failbacks in progress fleet-wide,
	// this binding's excluded.
	InProgress int
	// InNamespace is the number of those of the binding's namespace
	// ("" for cluster-scoped bindings), and NamespaceLimit how many one
	// namespace may have (0: no per-namespace limit): one tenant cannot
	// take the fleet's failback slots.
	InNamespace, NamespaceLimit int
	// UntaintedSince is when the hub last saw each cluster lose its last
	// NoSchedule/NoExecute taint (or first saw it without one): a taint
	// removed while Ready stayed True leaves no trace on the Cluster, yet
	// the cluster was not fit until then. Missing entries add nothing.
	UntaintedSince map[string]time.Time
	Now            time.Time
	// Schedule runs the scheduler on spec as the failback would leave it
	// (history of the returning clusters gone, a fresh schedule asked) and
	// returns the clusters it would place the workload on, or ok false when
	// nothing fits (CoreSchedule). A failback starts only if the result
	// includes a cluster it returns to. Nil confirms nothing: the workload
	// then returns only to clusters its eviction history says it left.
	Schedule func(spec *workv1alpha1.ResourceBindingSpec) (clusters []string, ok bool)
	// Targets is Schedule with the replicas each cluster would get
	// (CoreScheduleTargets), for the overflow come-back; nil never starts
	// one.
	Targets func(spec *workv1alpha1.ResourceBindingSpec) (targets []workv1alpha1.TargetCluster, ok bool)
	// RoomSince is when the trial schedule first found room in the
	// preferred group for overflowed replicas, without a break (the
	// controller keeps it from Decision.Room); zero: not yet.
	RoomSince time.Time
}

// Decision is the verdict on one binding.
type Decision struct {
	Action Action
	// Clusters are the clusters the workload returns to (sorted), for
	// every action but None.
	Clusters []string
	// After is how long until the window has passed (ActionWaitWindow).
	After time.Duration
	// Message says why, for events and logs.
	Message string
	// Room: the workload runs replicas on overflow groups and the trial
	// schedule brings some back to the preferred group (Input.RoomSince
	// starts, or goes on).
	Room bool
}

// Window is the binding's stabilization window.
func Window(fb *policyv1alpha1.FailbackBehavior) time.Duration {
	s := fb.StabilizationWindowSeconds
	if s <= 0 {
		s = DefaultStabilizationWindowSeconds
	}
	return time.Duration(s) * time.Second
}

// MaxConcurrent is the binding's fleet-wide limit.
func MaxConcurrent(fb *policyv1alpha1.FailbackBehavior) int {
	if fb.MaxConcurrent <= 0 {
		return DefaultMaxConcurrent
	}
	return int(fb.MaxConcurrent)
}

// InProgress reports whether the binding is failing back: the scheduler
// has not yet made the Failback reschedule asked of it, or a graceful task
// it made for one is still open.
func InProgress(spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus) bool {
	if slices.ContainsFunc(spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool {
		return t.Reason == workv1alpha1.EvictionReasonFailback
	}) {
		return true
	}
	return spec.RescheduleReason == workv1alpha1.EvictionReasonFailback && pendingReschedule(spec, status)
}

func pendingReschedule(spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus) bool {
	return spec.RescheduleTriggeredAt != nil &&
		(status.LastScheduledTime == nil || spec.RescheduleTriggeredAt.After(status.LastScheduledTime.Time))
}

// failureReason: an eviction made because something failed (a taint, the
// application), which a failback undoes. A rebalance or failback is where
// the workload was asked to go.
func failureReason(reason string) bool {
	return reason != workv1alpha1.EvictionReasonRebalance && reason != workv1alpha1.EvictionReasonFailback && reason != ReasonRolledBack
}

// Returning lists the clusters the workload would fail back to, sorted:
//   - the clusters its eviction history says a failure drove it from,
//     that it is not placed on now, that still exist and that its
//     placement still selects (for clusterAffinities: the first term);
//   - and when it runs on a later clusterAffinities term than the first:
//     those of them in the first term, or, when the history no longer
//     names any, every cluster of the first term it is not on. Those it
//     never left (firstTerm true) are only candidates: the workload may
//     never have fit there (issue 30), so Decide returns to them only when
//     the scheduler confirms it would place the workload there.
func Returning(spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus, clusters map[string]*clusterv1alpha1.Cluster) (returning []string, firstTerm bool) {
	if spec.Placement == nil {
		return nil, false
	}
	placed := map[string]bool{}
	for _, t := range spec.Clusters {
		placed[t.Name] = true
	}
	selects := func(c *clusterv1alpha1.Cluster) bool {
		return clusteraffinity.Matches(spec.Placement.ClusterAffinity, c)
	}
	laterTerm := false
	if terms := spec.Placement.ClusterAffinities; len(terms) > 0 {
		first := terms[0].ClusterAffinity
		selects = func(c *clusterv1alpha1.Cluster) bool { return clusteraffinity.Matches(&first, c) }
		laterTerm = status.SchedulerObservedAffinityName != "" && status.SchedulerObservedAffinityName != terms[0].AffinityName
	}
	set := map[string]bool{}
	for _, h := range spec.EvictionHistory {
		if !failureReason(h.Reason) || placed[h.ClusterName] {
			continue
		}
		if c := clusters[h.ClusterName]; c != nil && c.DeletionTimestamp == nil && selects(c) {
			set[h.ClusterName] = true
		}
	}
	if laterTerm && len(set) == 0 {
		firstTerm = true
		for name, c := range clusters {
			if !placed[name] && c.DeletionTimestamp == nil && selects(c) {
				set[name] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for name := range set {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, firstTerm
}

// unfit says why cluster c cannot take the workload back now, or "".
func unfit(c *clusterv1alpha1.Cluster, placement *policyv1alpha1.Placement) string {
	if !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
		return fmt.Sprintf("cluster %s is not Ready", c.Name)
	}
	if t := core.Untolerated(placement.ClusterTolerations, core.EffectiveTaints(c)); t != nil {
		return fmt.Sprintf("cluster %s has the untolerated taint {%s: %s}", c.Name, t.Key, t.Effect)
	}
	return ""
}

// StableSince is when cluster's current fit period started for this
// binding: the latest of its Ready transition, the binding's last eviction
// from it (an application failure leaves the cluster Ready), the binding's
// last failback (a failback is not repeated within a window) and when the
// cluster lost its last NoSchedule/NoExecute taint (untaintedSince; zero
// when unknown).
func StableSince(spec *workv1alpha1.ResourceBindingSpec, c *clusterv1alpha1.Cluster, untaintedSince, now time.Time) time.Time {
	since := now
	if ready := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); ready != nil && !ready.LastTransitionTime.IsZero() {
		since = ready.LastTransitionTime.Time
	}
	for _, h := range spec.EvictionHistory {
		if h.ClusterName == c.Name && h.EvictedAt.After(since) {
			since = h.EvictedAt.Time
		}
	}
	if spec.RescheduleReason == workv1alpha1.EvictionReasonFailback && spec.RescheduleTriggeredAt != nil && spec.RescheduleTriggeredAt.After(since) {
		since = spec.RescheduleTriggeredAt.Time
	}
	if untaintedSince.After(since) {
		since = untaintedSince
	}
	return since
}

// Decide is the failback decision for one binding. The order matters: a
// binding waits on its own clusters first, and only then on the fleet
// (guard, limit), so the fleet-wide waits are reported only for bindings
// that would otherwise move.
func Decide(in Input) Decision {
	fb := failbackOf(in.Spec)
	if fb == nil {
		return Decision{Action: ActionNone, Message: "failback is not enabled"}
	}
	returning, firstTerm := Returning(in.Spec, in.Status, in.Clusters)
	if firstTerm && in.Schedule == nil {
		return Decision{Action: ActionNone, Message: "the workload left none of the first term's clusters, and no scheduler confirms it fits there"}
	}
	// failover.application.blockPredecessorSeconds wins: a failback never
	// returns to a cluster still blocked after an application failure
	// (0: never, until the history entry goes).
	blocks := workobjects.PredecessorBlocks(in.Spec, in.Now)
	var blockedForever []string
	returning = slices.DeleteFunc(returning, func(name string) bool {
		for _, b := range blocks {
			if b.Cluster == name && b.Forever() {
				blockedForever = append(blockedForever, name)
				return true
			}
		}
		return false
	})
	if len(returning) == 0 {
		if d, ok := decideOverflow(in, fb); ok {
			if d.Action == ActionStart {
				return fleetWait(in, fb, d)
			}
			return d
		}
		if len(blockedForever) > 0 {
			return Decision{Action: ActionNone, Message: fmt.Sprintf("blockPredecessorSeconds 0 keeps the workload off %s", strings.Join(blockedForever, ", "))}
		}
		return Decision{Action: ActionNone, Message: "the workload runs where it should"}
	}
	d := Decision{Clusters: returning}
	if len(in.Spec.GracefulEvictionTasks) > 0 || pendingReschedule(in.Spec, in.Status) {
		d.Action, d.Message = ActionWaitTask, "a graceful eviction or a reschedule is in progress"
		return d
	}
	if rollout.Updating(in.Status.Rollout) {
		// One disruption budget: a failback does not move a workload
		// whose clusters a staged rollout is changing (the rollout, in
		// turn, counts failback tasks against its maxConcurrency).
		d.Action, d.Message = ActionWaitTask, fmt.Sprintf("a staged rollout of revision %d is updating clusters", in.Status.Rollout.Revision)
		return d
	}
	window := Window(fb)
	var wait time.Duration
	for _, b := range blocks {
		if left := b.Until.Sub(in.Now); slices.Contains(returning, b.Cluster) && left > wait {
			wait = left
		}
	}
	for _, name := range returning {
		c := in.Clusters[name]
		if why := unfit(c, in.Spec.Placement); why != "" {
			d.Action, d.Message = ActionWaitCluster, why
			return d
		}
		if left := StableSince(in.Spec, c, in.UntaintedSince[name], in.Now).Add(window).Sub(in.Now); left > wait {
			wait = left
		}
	}
	if wait > 0 {
		d.Action, d.After = ActionWaitWindow, wait
		d.Message = fmt.Sprintf("waiting %s more for %s to be Ready for the %s stabilization window", wait.Round(time.Second), strings.Join(returning, ", "), window)
		return d
	}
	lands := ""
	if in.Schedule != nil {
		// Ask the scheduler where the fresh schedule would land: a
		// failback that lands where the workload runs (the first term does
		// not fit, a returning cluster lacks what the placement needs)
		// would be a hub write and a reschedule for nothing, every window.
		trial := in.Spec.DeepCopy()
		Apply(trial, in.Status.DeepCopy(), returning, in.Now)
		targets, ok := in.Schedule(trial)
		confirmed := slices.DeleteFunc(slices.Clone(returning), func(name string) bool { return !slices.Contains(targets, name) })
		if !ok || len(confirmed) == 0 {
			d.Action = ActionWaitFit
			d.Message = fmt.Sprintf("the scheduler would not place the workload on %s now", strings.Join(returning, ", "))
			return d
		}
		// Clusters stay all the returning ones: Apply must make the very
		// spec the trial scheduled. One the scheduler leaves out loses its
		// history entry, so it is no reason for another failback.
		lands = "; the scheduler places it on " + strings.Join(targets, ", ")
	}
	d.Action = ActionStart
	d.Message = fmt.Sprintf("clusters %s have been Ready for the %s stabilization window%s", strings.Join(d.Clusters, ", "), window, lands)
	return fleetWait(in, fb, d)
}

// fleetWait holds a failback d that may start while the fleet guard sees
// a disruption or the fleet-wide or namespace limit is reached.
func fleetWait(in Input, fb *policyv1alpha1.FailbackBehavior, d Decision) Decision {
	if why := in.Guard.Disruption(); why != "" {
		d.Action, d.Message = ActionWaitGuard, "the fleet guard sees a disruption: "+why
		return d
	}
	if limit := MaxConcurrent(fb); in.InProgress >= limit {
		d.Action = ActionWaitLimit
		d.Message = fmt.Sprintf("%d failbacks are in progress fleet-wide (maxConcurrent %d)", in.InProgress, limit)
		return d
	}
	if in.NamespaceLimit > 0 && in.InNamespace >= in.NamespaceLimit {
		d.Action = ActionWaitLimit
		d.Message = fmt.Sprintf("%d failbacks of this namespace are in progress (--failback-max-concurrent-per-namespace %d)", in.InNamespace, in.NamespaceLimit)
		return d
	}
	return d
}

// CoreSchedule is Input.Schedule for the scheduler core: the fresh
// schedule the scheduler makes of a Failback request (first term first,
// replicas divided from scratch), on the fleet clusters.
func CoreSchedule(key string, clusters []*clusterv1alpha1.Cluster, observedAffinity string, evictionHistoryTTL time.Duration, now time.Time) func(*workv1alpha1.ResourceBindingSpec) ([]string, bool) {
	return func(spec *workv1alpha1.ResourceBindingSpec) ([]string, bool) {
		res, err := core.Schedule(core.Input{Key: key, Spec: spec, Clusters: clusters, Now: now,
			EvictionHistoryTTL: evictionHistoryTTL, ObservedAffinityName: observedAffinity, Fresh: true})
		if err != nil {
			return nil, false
		}
		out := make([]string, 0, len(res.Clusters))
		for _, t := range res.Clusters {
			if t.Replicas > 0 || spec.Replicas == 0 || !divided(spec) {
				out = append(out, t.Name)
			}
		}
		return out, true
	}
}

func divided(spec *workv1alpha1.ResourceBindingSpec) bool {
	if spec.Placement == nil {
		return false
	}
	rs := spec.Placement.ReplicaScheduling
	return rs != nil && rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDivided
}

func failbackOf(spec *workv1alpha1.ResourceBindingSpec) *policyv1alpha1.FailbackBehavior {
	if spec.Failover == nil {
		return nil
	}
	return spec.Failover.Failback
}

// Apply makes the failback in spec: the eviction history forgets the
// returning clusters (or the scheduler would avoid them) and a fresh
// schedule is asked for with reason Failback, so the scheduler divides
// again from scratch and removes or shrinks the other copies only through
// graceful tasks. The trigger is later than the last schedule even at the
// API's one-second precision.
//
// The history of a cluster the workload runs on again goes too (unless it
// still blocks the cluster, blockPredecessorSeconds): the fresh schedule
// would otherwise avoid it and move the whole workload to the returning
// clusters, leaving that one as a cluster it "left", and the next window
// would fail back there (ping-pong; found by TestFailbackProperty).
func Apply(spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus, returning []string, now time.Time) {
	blocks := workobjects.PredecessorBlocks(spec, now)
	spec.EvictionHistory = slices.DeleteFunc(slices.Clone(spec.EvictionHistory), func(h workv1alpha1.EvictionHistoryEntry) bool {
		if slices.Contains(returning, h.ClusterName) {
			return true
		}
		placed := slices.ContainsFunc(spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == h.ClusterName })
		return placed && !slices.ContainsFunc(blocks, func(b workobjects.PredecessorBlock) bool { return b.Cluster == h.ClusterName })
	})
	if len(spec.EvictionHistory) == 0 {
		spec.EvictionHistory = nil
	}
	at := now.Truncate(time.Second)
	if status.LastScheduledTime != nil && !at.After(status.LastScheduledTime.Time) {
		at = status.LastScheduledTime.Truncate(time.Second).Add(time.Second)
	}
	t := metav1.NewTime(at)
	spec.RescheduleTriggeredAt = &t
	spec.RescheduleReason = workv1alpha1.EvictionReasonFailback
}
