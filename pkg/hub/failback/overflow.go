package failback

import (
	"fmt"
	"slices"
	"strings"
	"time"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The overflow come-back: a workload whose clusterAffinities term has
// overflowAffinities runs some replicas on overflow groups (its preferred
// group had no room, or a preferred cluster failed). Once the preferred
// group has room for some of them, and has had it for the stabilization
// window, a failback asks the scheduler for a fresh schedule: the
// preferred group takes what it has room for, the overflow copies shrink
// or go through graceful tasks, only once the new replicas are healthy.
// Karmada leaves them where they are (its proposal: "to avoid replica
// flapping"); with failover.failback Flotilla brings them back, with the
// failback's damping: the room must hold for the window, a failback
// restarts the window, and the scheduler's trial must confirm fewer
// overflow replicas, so a come-back that the room does not allow never
// starts.

// overflowTerm is the binding's term in use when it has overflow groups
// the binding may use, or nil.
func overflowTerm(spec *workv1alpha1.ResourceBindingSpec, status *workv1alpha1.ResourceBindingStatus) *policyv1alpha1.ClusterAffinityTerm {
	p := spec.Placement
	if p == nil || !core.OverflowAllowed(spec.Replicas, p) {
		return nil
	}
	name := status.SchedulerObservedAffinityName
	for i := range p.ClusterAffinities {
		if t := &p.ClusterAffinities[i]; t.AffinityName == name && len(t.OverflowAffinities) > 0 {
			return t
		}
	}
	return nil
}

// overflowed is how many of targets' replicas run on overflow groups of
// term (clusters the hub does not know, or that no group selects any
// more, do not count: the scheduler deals with those).
func overflowed(p *policyv1alpha1.Placement, term string, targets []workv1alpha1.TargetCluster, clusters map[string]*clusterv1alpha1.Cluster) int32 {
	var n int32
	for _, t := range targets {
		if c := clusters[t.Name]; c != nil && core.OverflowGroup(p, term, c) > 0 {
			n += t.Replicas
		}
	}
	return n
}

// preferredClusters are the clusters of the term's preferred group the
// workload may come back to, sorted: not being deleted, not blocked for
// good by blockPredecessorSeconds 0, and not left by a rolled-back
// failback (its new copies did not become healthy there; another failure
// or a rebalance clears that).
func preferredClusters(in Input, term string) []string {
	var out []string
	blocks := workobjects.PredecessorBlocks(in.Spec, in.Now)
	for name, c := range in.Clusters {
		if c.DeletionTimestamp != nil || core.OverflowGroup(in.Spec.Placement, term, c) != 0 {
			continue
		}
		if slices.ContainsFunc(blocks, func(b workobjects.PredecessorBlock) bool { return b.Cluster == name && b.Forever() }) {
			continue
		}
		if slices.ContainsFunc(in.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
			return h.ClusterName == name && h.Reason == ReasonRolledBack
		}) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// decideOverflow is Decide for a workload that runs replicas on overflow
// groups and left no cluster a failover drove it from; ok false when it
// does not (nothing overflowed, no overflow groups).
func decideOverflow(in Input, fb *policyv1alpha1.FailbackBehavior) (Decision, bool) {
	term := overflowTerm(in.Spec, in.Status)
	if term == nil {
		return Decision{}, false
	}
	now := overflowed(in.Spec.Placement, term.AffinityName, in.Spec.Clusters, in.Clusters)
	if now == 0 {
		return Decision{}, false
	}
	candidates := preferredClusters(in, term.AffinityName)
	if len(candidates) == 0 {
		return Decision{Action: ActionNone, Message: fmt.Sprintf("%d replicas run on overflow groups and no cluster of the preferred group %q can take them", now, term.AffinityName)}, true
	}
	d := Decision{Clusters: candidates}
	if len(in.Spec.GracefulEvictionTasks) > 0 || pendingReschedule(in.Spec, in.Status) {
		d.Action, d.Message = ActionWaitTask, "a graceful eviction or a reschedule is in progress"
		return d, true
	}
	if in.Targets == nil {
		return Decision{Action: ActionNone, Message: "no scheduler confirms the preferred group has room"}, true
	}
	// The trial is the very spec Apply will write.
	trial := in.Spec.DeepCopy()
	Apply(trial, in.Status.DeepCopy(), candidates, in.Now)
	targets, ok := in.Targets(trial)
	after := int32(0)
	if ok {
		after = overflowed(in.Spec.Placement, term.AffinityName, targets, in.Clusters)
	}
	if !ok || after >= now {
		d.Action = ActionWaitFit
		d.Message = fmt.Sprintf("%d replicas run on overflow groups; the preferred group %q has no room for any of them", now, term.AffinityName)
		return d, true
	}
	d.Room = true
	// The clusters that gain replicas: they must be fit, and have been for
	// the window, as a cluster failed back to must.
	current := map[string]int32{}
	for _, t := range in.Spec.Clusters {
		current[t.Name] = t.Replicas
	}
	var gaining []string
	for _, t := range targets {
		if t.Replicas > current[t.Name] && slices.Contains(candidates, t.Name) {
			gaining = append(gaining, fmt.Sprintf("%s(%d→%d)", t.Name, current[t.Name], t.Replicas))
			if why := unfit(in.Clusters[t.Name], in.Spec.Placement); why != "" {
				d.Action, d.Message = ActionWaitCluster, why
				return d, true
			}
		}
	}
	window := Window(fb)
	roomSince := in.RoomSince
	if roomSince.IsZero() || roomSince.After(in.Now) {
		roomSince = in.Now
	}
	wait := roomSince.Add(window).Sub(in.Now)
	for _, t := range targets {
		if c := in.Clusters[t.Name]; c != nil && t.Replicas > current[t.Name] {
			if left := StableSince(in.Spec, c, in.UntaintedSince[t.Name], in.Now).Add(window).Sub(in.Now); left > wait {
				wait = left
			}
		}
	}
	if wait > 0 {
		d.Action, d.After = ActionWaitWindow, wait
		d.Message = fmt.Sprintf("waiting %s more: the preferred group %q must have room for the %s stabilization window (%d of %d overflowed replicas would come back to %s)",
			wait.Round(time.Second), term.AffinityName, window, now-after, now, strings.Join(gaining, ", "))
		return d, true
	}
	d.Action = ActionStart
	d.Message = fmt.Sprintf("the preferred group %q has had room for the %s stabilization window: %d of %d overflowed replicas come back to %s",
		term.AffinityName, window, now-after, now, strings.Join(gaining, ", "))
	return d, true
}

// CoreScheduleTargets is Input.Targets for the scheduler core: the fresh
// schedule the scheduler makes of a Failback request, with replicas.
func CoreScheduleTargets(key string, clusters []*clusterv1alpha1.Cluster, observedAffinity string, evictionHistoryTTL time.Duration, now time.Time) func(*workv1alpha1.ResourceBindingSpec) ([]workv1alpha1.TargetCluster, bool) {
	return func(spec *workv1alpha1.ResourceBindingSpec) ([]workv1alpha1.TargetCluster, bool) {
		res, err := core.Schedule(core.Input{Key: key, Spec: spec, Clusters: clusters, Now: now,
			EvictionHistoryTTL: evictionHistoryTTL, ObservedAffinityName: observedAffinity, Fresh: true})
		if err != nil {
			return nil, false
		}
		return res.Clusters, true
	}
}
