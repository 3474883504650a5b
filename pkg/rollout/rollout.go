// Package rollout decides which revision of a template each cluster runs:
// the health-gated, staged rollout of issue 38. Decide is a pure function;
// the binding controller gathers its Input (the strategy, the revisions,
// each target cluster's labels, the revision its Work renders and that
// copy's health, the last written status, the approvals) and renders each
// cluster's Work from the revision Decide names.
//
// The rules, which the property tests check over random schedules:
//
//   - Strategy All (or none) gives every cluster the newest revision at
//     once, as Flotilla always did; the newest revision is the stable one.
//   - Otherwise the clusters form groups (Progressive: one group, ordered
//     by sortingLabelKey then name; ProgressivePerGroup: each cluster in
//     the first decision group that selects it, the rest in a last group
//     "remaining"). A group is reached when every group before it
//     succeeded: each of its clusters' copies Healthy on the revision for
//     minSuccessTime, its analysis Successful and its approval given.
//   - A cluster receives the newest revision only once its group is
//     reached, and within the group only while fewer than maxConcurrency
//     of the group's clusters are updating (clusters whose copy is being
//     evicted or failed back count too). A cluster without a copy, in a
//     group not reached (a failover replacement, a joining cluster), gets
//     the stable revision, so a revision not through its gates never
//     spreads through failover; with no stable revision yet (a new
//     workload), it gets nothing until its group is reached.
//   - A copy that is not Healthy for progressDeadline after its update, or
//     after it was last Healthy, has Failed; more than maxFailures Failed
//     clusters, or a Failed analysis, halt the revision: from then on the
//     set of clusters that run it never grows. With rollback they return
//     to the stable revision (all at once, or a batch at a time).
//   - A cluster that is not Ready (Lost) is neither a success nor a
//     failure: its group succeeds without it, and its workload fails over
//     on the stable revision.
//   - Unknown health never counts as success.
package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// DefaultProgressDeadline is progressDeadline when the strategy sets none.
const DefaultProgressDeadline = 10 * time.Minute

// HoldRecheck is how soon a rollout the fleet guard holds is decided
// again.
const HoldRecheck = 5 * time.Second

// AllGroupName names the one group of an All or Progressive rollout.
const AllGroupName = "all"

// Cluster is one target cluster as Decide sees it.
type Cluster struct {
	Name   string
	Labels map[string]string
	// Running is the revision its Work renders; 0 when it has no Work.
	Running int64
	// Health is the health of that copy (the agent applied the Work's
	// current generation); Unknown otherwise.
	Health workv1alpha1.ResourceHealth
	// Lost: the cluster is not Ready; LostReason says why.
	Lost       bool
	LostReason string
}

// Analyzer reports the analysis of group over clusters; nil when the
// hub runs no analyses (every analysis is then Inconclusive).
type Analyzer func(group string, spec policyv1alpha1.RolloutAnalysis, clusters []string) workv1alpha1.AnalysisStatus

// Input is everything Decide needs. Decide changes none of it.
type Input struct {
	Strategy *policyv1alpha1.RolloutStrategy
	// Target is the newest revision; Stable the last completed one (0:
	// none).
	Target, Stable int64
	// Previous is the status Decide returned last time (nil: none).
	Previous *workv1alpha1.RolloutStatus
	Clusters []Cluster
	Now      time.Time
	// Approve and Resume are the template's rollout annotations.
	Approve, Resume string
	// Hold, when not empty, says why no cluster may start updating now
	// (the fleet guard sees fleet-wide disruption).
	Hold string
	// Template is how kubectl flotilla names the template in the
	// commands the messages suggest, e.g. "web -n shop".
	Template string
	// Disruptions is how many of the workload's copies are being evicted
	// or failed back: they count against the current group's
	// maxConcurrency (one disruption budget for rollout and failover).
	Disruptions int
	Analyzer    Analyzer
	// MinSuccessTimeFloor is the least soak time: a dependency gated by
	// the health of the workloads that need it soaks at least this long,
	// as a workload reports its health only when it changes.
	MinSuccessTimeFloor time.Duration
}

// Event is something a person should see on the binding.
type Event struct {
	Type, Reason, Message string
}

// EventReason is the reason an event of e has on the binding: the
// rollout's reasons, prefixed with Rollout where they do not say it.
func (e Event) EventReason() string {
	if strings.HasPrefix(e.Reason, "Rollout") {
		return e.Reason
	}
	return "Rollout" + e.Reason
}

// Event reasons.
const (
	ReasonGroupSucceeded  = "RolloutGroupSucceeded"
	ReasonRollingBack     = "RollingBack"
	ReasonRolledBack      = "RolledBack"
	ReasonComplete        = "Complete"
	ReasonWaitingApproval = "WaitingForApproval"
	ReasonAnalysisPaused  = "AnalysisInconclusive"
	ReasonGroupEmptied    = "GroupEmptied"
	ReasonResumed         = "Resumed"
	ReasonFleetGuardHolds = "FleetGuardHolds"
	ReasonClusterFailed   = "ClusterFailed"
	ReasonAnalysisFailed  = "AnalysisFailed"
	ReasonProgressing     = "Progressing"
)

// Decision is what Decide returns.
type Decision struct {
	// Revisions is the revision each cluster's Work renders; a cluster
	// missing from it gets no Work (yet).
	Revisions map[string]int64
	// Status is the new rollout status.
	Status workv1alpha1.RolloutStatus
	// Stable is the stable revision after this decision (Target once the
	// rollout completed).
	Stable int64
	Events []Event
	// RequeueAfter, when positive, is when a soak ends or a deadline
	// passes: decide again then.
	RequeueAfter time.Duration
}

type group struct {
	name           string
	clusters       []*Cluster // in update order
	maxConcurrency int
	approval       bool
	analysis       *policyv1alpha1.RolloutAnalysis
}

// Decide decides. See the package comment for the rules.
func Decide(in Input) Decision {
	d := Decision{Revisions: map[string]int64{}, Stable: in.Stable}
	typ := policyv1alpha1.RolloutTypeAll
	if in.Strategy != nil && in.Strategy.Type != "" {
		typ = in.Strategy.Type
	}
	if typ == policyv1alpha1.RolloutTypeAll || in.Target == in.Stable {
		return settled(in, d, typ == policyv1alpha1.RolloutTypeAll)
	}
	return progressive(in, d)
}

// settled: every cluster gets the target (strategy All, or nothing is
// rolling out).
func settled(in Input, d Decision, all bool) Decision {
	d.Stable = in.Target
	st := workv1alpha1.RolloutStatus{Revision: in.Target, StableRevision: in.Target, Phase: workv1alpha1.RolloutPhaseComplete}
	prev := previousClusters(in)
	groupOf, order := map[string]string{}, map[string]int{}
	if !all {
		for i, g := range groups(in.Strategy, in.Clusters) {
			order[g.name] = i
			for _, c := range g.clusters {
				groupOf[c.Name] = g.name
			}
		}
	}
	pending := 0
	for i := range in.Clusters {
		c := &in.Clusters[i]
		d.Revisions[c.Name] = in.Target
		group := AllGroupName
		if g, ok := groupOf[c.Name]; ok {
			group = g
		}
		cs := workv1alpha1.ClusterRolloutStatus{ClusterName: c.Name, Revision: c.Running, Group: group}
		if p, ok := prev[c.Name]; ok && p.Revision == c.Running {
			cs.UpdatedTime = p.UpdatedTime
		}
		switch {
		case c.Lost:
			cs.Verdict, cs.Message = workv1alpha1.VerdictLost, lostMessage(c)
		case c.Running == in.Target && c.Health == workv1alpha1.ResourceHealthy:
			cs.Verdict = workv1alpha1.VerdictSucceeded
		default:
			cs.Verdict = workv1alpha1.VerdictUpdating
			pending++
		}
		st.Clusters = append(st.Clusters, cs)
	}
	st.Reason = ReasonComplete
	if pending > 0 {
		st.Phase, st.Reason = workv1alpha1.RolloutPhaseProgressing, ReasonProgressing
		st.Message = fmt.Sprintf("%d of %d clusters run revision %d Healthy", len(in.Clusters)-pending, len(in.Clusters), in.Target)
	} else {
		st.Message = fmt.Sprintf("every cluster runs revision %d", in.Target)
	}
	if all {
		st.Group = AllGroupName
	}
	sortClusters(st.Clusters, order)
	st.Clusters = boundClusters(st.Clusters)
	// No event: with strategy All a change reaching every cluster is the
	// routine step (a staged rollout says it completed when it does).
	d.Status = st
	return d
}

func previousClusters(in Input) map[string]workv1alpha1.ClusterRolloutStatus {
	out := map[string]workv1alpha1.ClusterRolloutStatus{}
	if in.Previous == nil {
		return out
	}
	for _, c := range in.Previous.Clusters {
		out[c.ClusterName] = c
	}
	return out
}

func lostMessage(c *Cluster) string {
	if c.LostReason != "" {
		return statuslimits.Text("the cluster is not Ready: "+c.LostReason, 1024)
	}
	return "the cluster is not Ready"
}

// groups partitions the clusters as the strategy says.
func groups(s *policyv1alpha1.RolloutStrategy, clusters []Cluster) []group {
	if s.Type == policyv1alpha1.RolloutTypeProgressive {
		g := group{name: AllGroupName, maxConcurrency: 1}
		key := ""
		if p := s.Progressive; p != nil {
			key = p.SortingLabelKey
		}
		for i := range clusters {
			g.clusters = append(g.clusters, &clusters[i])
		}
		sortByLabel(g.clusters, key)
		if p := s.Progressive; p != nil && p.MaxConcurrency != nil {
			g.maxConcurrency = scaled(p.MaxConcurrency, len(g.clusters), true)
		}
		return []group{g}
	}
	var out []group
	placed := map[string]bool{}
	if p := s.ProgressivePerGroup; p != nil {
		for _, dg := range p.DecisionGroups {
			g := group{name: dg.GroupName, approval: dg.Approval == policyv1alpha1.ApprovalRequired, analysis: dg.Analysis}
			sel, err := metav1.LabelSelectorAsSelector(dg.GroupClusterSelector.LabelSelector)
			if err != nil || dg.GroupClusterSelector.LabelSelector == nil {
				sel = labels.Nothing()
			}
			for i := range clusters {
				c := &clusters[i]
				if !placed[c.Name] && sel.Matches(labels.Set(c.Labels)) {
					placed[c.Name] = true
					g.clusters = append(g.clusters, c)
				}
			}
			sortByLabel(g.clusters, "")
			g.maxConcurrency = len(g.clusters)
			if dg.MaxConcurrency != nil {
				g.maxConcurrency = scaled(dg.MaxConcurrency, len(g.clusters), true)
			}
			out = append(out, g)
		}
	}
	rest := group{name: policyv1alpha1.RemainingGroupName}
	for i := range clusters {
		if !placed[clusters[i].Name] {
			rest.clusters = append(rest.clusters, &clusters[i])
		}
	}
	if len(rest.clusters) > 0 {
		sortByLabel(rest.clusters, "")
		rest.maxConcurrency = len(rest.clusters)
		out = append(out, rest)
	}
	return out
}

func sortByLabel(cs []*Cluster, key string) {
	sort.SliceStable(cs, func(i, j int) bool {
		if key != "" {
			if a, b := cs[i].Labels[key], cs[j].Labels[key]; a != b {
				return a < b
			}
		}
		return cs[i].Name < cs[j].Name
	})
}

// scaled resolves a number or percentage of total; at least 1 when
// roundUp (a concurrency), at least 0 otherwise.
func scaled(v *intstr.IntOrString, total int, roundUp bool) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, roundUp)
	if err != nil || n < 0 {
		n = 0
	}
	if roundUp && n < 1 {
		n = 1
	}
	return n
}

func config(s *policyv1alpha1.RolloutStrategy) policyv1alpha1.RolloutConfig {
	switch {
	case s.Type == policyv1alpha1.RolloutTypeProgressive && s.Progressive != nil:
		return s.Progressive.RolloutConfig
	case s.Type == policyv1alpha1.RolloutTypeProgressivePerGroup && s.ProgressivePerGroup != nil:
		return s.ProgressivePerGroup.RolloutConfig
	}
	return policyv1alpha1.RolloutConfig{}
}

// ParseApproval reads an approve annotation: "<revision>/<group>".
func ParseApproval(v string) (int64, string, bool) {
	rev, group, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.ParseInt(rev, 10, 64)
	return n, group, err == nil && n > 0 && group != ""
}

// ParseResume reads a resume annotation: "<revision>" or
// "<revision>/<token>"; a value is honoured once (status.rollout.resumed).
func ParseResume(v string) (int64, bool) {
	rev, _, _ := strings.Cut(strings.TrimSpace(v), "/")
	n, err := strconv.ParseInt(rev, 10, 64)
	return n, err == nil && n > 0
}

func progressive(in Input, d Decision) Decision {
	if len(in.Clusters) == 0 {
		// Nothing is scheduled yet (or any more): a revision no cluster
		// ran has passed no gate, so it does not complete.
		d.Status = workv1alpha1.RolloutStatus{Revision: in.Target, StableRevision: in.Stable, Phase: workv1alpha1.RolloutPhaseProgressing,
			Reason: ReasonProgressing, Message: fmt.Sprintf("revision %d waits: no cluster is scheduled", in.Target)}
		if p := in.Previous; p != nil && p.Revision == in.Target && halted(p.Phase) {
			d.Status.Phase, d.Status.Reason, d.Status.Message, d.Status.HaltedTime = p.Phase, p.Reason, p.Message, p.HaltedTime
		}
		return d
	}
	s := in.Strategy
	cfg := config(s)
	deadline := DefaultProgressDeadline
	if cfg.ProgressDeadline != nil && cfg.ProgressDeadline.Duration > 0 {
		deadline = cfg.ProgressDeadline.Duration
	}
	soak := max(cfg.MinSuccessTime.Duration, in.MinSuccessTimeFloor, 0)
	gs := groups(s, in.Clusters)
	now := metav1.NewTime(in.Now)

	st := workv1alpha1.RolloutStatus{Revision: in.Target, StableRevision: in.Stable, Phase: workv1alpha1.RolloutPhaseProgressing}
	prev := in.Previous
	same := prev != nil && prev.Revision == in.Target
	if same {
		st.Phase, st.Group, st.HaltedTime, st.Failures, st.Resumed = prev.Phase, prev.Group, prev.HaltedTime, prev.Failures, prev.Resumed
		st.Message, st.Reason = prev.Message, prev.Reason
	}
	prevClusters := previousClusters(in)
	if !same {
		prevClusters = map[string]workv1alpha1.ClusterRolloutStatus{}
		if prev != nil {
			for _, c := range prev.Clusters {
				if c.Revision == in.Target {
					prevClusters[c.ClusterName] = c
				}
			}
		}
	}
	// A resume not honoured before clears the halt and the failures.
	if rev, ok := ParseResume(in.Resume); ok && rev == in.Target && in.Resume != st.Resumed && halted(st.Phase) {
		st.Phase, st.HaltedTime, st.Failures, st.Resumed = workv1alpha1.RolloutPhaseProgressing, nil, 0, in.Resume
		for name, c := range prevClusters {
			if c.Verdict == workv1alpha1.VerdictFailed || c.Verdict == workv1alpha1.VerdictRolledBack {
				c.Verdict, c.UpdatedTime, c.LastHealthyTime = workv1alpha1.VerdictUpdating, &now, nil
				if c.Revision != in.Target {
					delete(prevClusters, name)
					continue
				}
				prevClusters[name] = c
			}
		}
		d.Events = append(d.Events, Event{"Normal", ReasonResumed, fmt.Sprintf("revision %d resumed (%s)", in.Target, in.Resume)})
	} else if in.Resume != st.Resumed && !halted(st.Phase) {
		// A resume given while nothing was halted is spent, so a later
		// halt is not resumed by an old annotation.
		if rev, ok := ParseResume(in.Resume); ok && rev == in.Target {
			st.Resumed = in.Resume
		}
	}

	// Index of the group the rollout is in.
	gi := 0
	if same {
		for i, g := range gs {
			if g.name == st.Group {
				gi = i
				break
			}
		}
	}
	approvedTo := -1
	if rev, name, ok := ParseApproval(in.Approve); ok && rev == in.Target {
		for i, g := range gs {
			if g.name == name {
				approvedTo = i
			}
		}
	}

	// Verdicts of the clusters that run the target.
	verdicts := map[string]*workv1alpha1.ClusterRolloutStatus{}
	var requeue []time.Duration
	failures := 0
	var failed []string
	for _, g := range gs {
		for _, c := range g.clusters {
			cs := &workv1alpha1.ClusterRolloutStatus{ClusterName: c.Name, Revision: c.Running, Group: g.name, Verdict: workv1alpha1.VerdictPending}
			verdicts[c.Name] = cs
			if c.Running != in.Target {
				if p, ok := prevClusters[c.Name]; ok && p.Verdict == workv1alpha1.VerdictRolledBack {
					cs.Verdict, cs.UpdatedTime, cs.Message = workv1alpha1.VerdictRolledBack, p.UpdatedTime, p.Message
				}
				if c.Lost {
					cs.Verdict, cs.Message = workv1alpha1.VerdictLost, lostMessage(c)
				}
				continue
			}
			p, had := prevClusters[c.Name]
			cs.UpdatedTime = &now
			if had && p.UpdatedTime != nil {
				cs.UpdatedTime = p.UpdatedTime
			}
			if had {
				cs.LastHealthyTime, cs.HealthySince = p.LastHealthyTime, p.HealthySince
			}
			switch {
			case had && p.Verdict == workv1alpha1.VerdictFailed:
				cs.Verdict, cs.Message = workv1alpha1.VerdictFailed, p.Message
			case c.Lost:
				cs.Verdict, cs.Message, cs.HealthySince = workv1alpha1.VerdictLost, lostMessage(c), nil
			case c.Health == workv1alpha1.ResourceHealthy:
				if cs.HealthySince == nil {
					cs.HealthySince = &now
				}
				cs.LastHealthyTime = &now
				if in.Now.Sub(cs.HealthySince.Time) >= soak {
					cs.Verdict = workv1alpha1.VerdictSucceeded
				} else {
					cs.Verdict = workv1alpha1.VerdictSoaking
					requeue = append(requeue, soak-in.Now.Sub(cs.HealthySince.Time))
				}
			default:
				cs.HealthySince = nil
				since := cs.UpdatedTime.Time
				if cs.LastHealthyTime != nil && cs.LastHealthyTime.After(since) {
					since = cs.LastHealthyTime.Time
				}
				if in.Now.Sub(since) > deadline {
					cs.Verdict = workv1alpha1.VerdictFailed
					cs.Message = fmt.Sprintf("its copy of revision %d was not Healthy (%s) for more than the progressDeadline %s", in.Target, healthWord(c.Health), deadline)
					d.Events = append(d.Events, Event{"Warning", ReasonClusterFailed, "cluster " + c.Name + ": " + cs.Message})
				} else {
					cs.Verdict = workv1alpha1.VerdictUpdating
					requeue = append(requeue, deadline-in.Now.Sub(since)+time.Second)
				}
			}
			if cs.Verdict == workv1alpha1.VerdictFailed {
				failures++
				failed = append(failed, c.Name)
			}
		}
	}
	total := len(in.Clusters)
	maxFailures := 0
	if cfg.MaxFailures != nil {
		maxFailures = scaled(cfg.MaxFailures, total, false)
	}
	st.Failures = int32(failures)
	if same && halted(st.Phase) && prev.Failures > st.Failures {
		st.Failures = prev.Failures // rolled back: the failures that halted it stay counted
	}

	if !halted(st.Phase) && failures > maxFailures {
		st.Phase, st.HaltedTime, st.Reason = workv1alpha1.RolloutPhaseHalted, &now, ReasonClusterFailed
		st.Message = statuslimits.Text(fmt.Sprintf("revision %d halted in group %s: %d cluster(s) failed (maxFailures %d): %s; no further cluster receives it",
			in.Target, groupName(gs, gi), failures, maxFailures, statuslimits.Join(failed, ", ", 512, "clusters")), 4096)
		d.Events = append(d.Events, Event{"Warning", "RolloutHalted", st.Message})
	}

	// Advance through the groups that succeeded. A halted rollout keeps
	// the analysis that halted it.
	st.Analysis = nil
	if same && halted(st.Phase) {
		st.Analysis = prev.Analysis
	}
	if !halted(st.Phase) {
		for gi < len(gs) {
			g := gs[gi]
			ok, wait, msg := groupDone(in, g, gi, verdicts, approvedTo, &st, &d)
			if st.Phase == workv1alpha1.RolloutPhaseHalted {
				break
			}
			if !ok {
				if wait != "" {
					st.Phase, st.Message, st.Reason = workv1alpha1.RolloutPhaseWaiting, msg, wait
					if prev == nil || !same || prev.Phase != workv1alpha1.RolloutPhaseWaiting || prev.Group != g.name {
						d.Events = append(d.Events, Event{"Normal", wait, msg})
					}
				} else {
					st.Phase, st.Message, st.Reason = workv1alpha1.RolloutPhaseProgressing, msg, ReasonProgressing
				}
				break
			}
			d.Events = append(d.Events, Event{"Normal", ReasonGroupSucceeded, fmt.Sprintf("revision %d: group %s succeeded", in.Target, g.name)})
			st.Analysis = nil
			gi++
		}
		if gi >= len(gs) && st.Phase != workv1alpha1.RolloutPhaseHalted {
			st.Phase, st.Reason = workv1alpha1.RolloutPhaseComplete, ReasonComplete
			st.Message = fmt.Sprintf("revision %d succeeded in every group", in.Target)
			d.Stable, st.StableRevision = in.Target, in.Target
			d.Events = append(d.Events, Event{"Normal", ReasonComplete, st.Message})
		}
	}
	if gi < len(gs) {
		st.Group, st.GroupIndex = gs[gi].name, int32(gi)
	} else if len(gs) > 0 {
		st.Group, st.GroupIndex = gs[len(gs)-1].name, int32(len(gs)-1)
	}

	// Which revision each cluster renders.
	switch {
	case st.Phase == workv1alpha1.RolloutPhaseComplete:
		for _, c := range in.Clusters {
			d.Revisions[c.Name] = in.Target
		}
	case halted(st.Phase):
		rollback(in, gs, verdicts, deadline, &st, &d, &requeue)
	default:
		for i, g := range gs {
			switch {
			case i < gi:
				for _, c := range g.clusters {
					d.Revisions[c.Name] = in.Target
				}
			case i == gi:
				updating := in.Disruptions
				for _, c := range g.clusters {
					v := verdicts[c.Name].Verdict
					if c.Running == in.Target && (v == workv1alpha1.VerdictUpdating || v == workv1alpha1.VerdictSoaking) {
						updating++
					}
				}
				for _, c := range g.clusters {
					switch {
					case c.Running == in.Target:
						d.Revisions[c.Name] = in.Target
					case in.Hold == "" && !c.Lost && updating < g.maxConcurrency:
						d.Revisions[c.Name] = in.Target
						cs := verdicts[c.Name]
						cs.Verdict, cs.UpdatedTime, cs.Revision, cs.Message = workv1alpha1.VerdictUpdating, &now, in.Target, ""
						updating++
						requeue = append(requeue, deadline+time.Second)
					default:
						keep(d.Revisions, c, in.Stable)
					}
				}
			default:
				for _, c := range g.clusters {
					keep(d.Revisions, c, in.Stable)
				}
			}
		}
		if in.Hold != "" && st.Phase == workv1alpha1.RolloutPhaseProgressing {
			// The guard's verdict changes without an event on the binding.
			requeue = append(requeue, HoldRecheck)
			st.Phase, st.Reason = workv1alpha1.RolloutPhaseWaiting, ReasonFleetGuardHolds
			st.Message = statuslimits.Text("no cluster starts updating: "+in.Hold, 4096)
			if prev == nil || !same || prev.Phase != workv1alpha1.RolloutPhaseWaiting {
				d.Events = append(d.Events, Event{"Normal", ReasonFleetGuardHolds, st.Message})
			}
		}
	}

	order := map[string]int{}
	for i, g := range gs {
		order[g.name] = i
	}
	for _, cs := range verdicts {
		st.Clusters = append(st.Clusters, *cs)
	}
	sortClusters(st.Clusters, order)
	st.Clusters = boundClusters(st.Clusters)
	st.Message = statuslimits.Text(st.Message, 4096)
	d.Status = st
	for _, r := range requeue {
		if r > 0 && (d.RequeueAfter == 0 || r < d.RequeueAfter) {
			d.RequeueAfter = r
		}
	}
	return d
}

// keep: a cluster the revision has not reached keeps the revision it runs;
// one without a copy gets the stable revision (none when there is none).
func keep(revs map[string]int64, c *Cluster, stable int64) {
	switch {
	case c.Running > 0:
		revs[c.Name] = c.Running
	case stable > 0:
		revs[c.Name] = stable
	}
}

func halted(p workv1alpha1.RolloutPhase) bool {
	return p == workv1alpha1.RolloutPhaseHalted || p == workv1alpha1.RolloutPhaseRollingBack || p == workv1alpha1.RolloutPhaseRolledBack
}

func groupName(gs []group, i int) string {
	if i < len(gs) {
		return gs[i].name
	}
	return ""
}

func healthWord(h workv1alpha1.ResourceHealth) string {
	if h == "" {
		return string(workv1alpha1.ResourceUnknown)
	}
	return string(h)
}

// groupDone says whether group g succeeded; if not, whether it waits for
// a person (the event reason) and why.
func groupDone(in Input, g group, gi int, verdicts map[string]*workv1alpha1.ClusterRolloutStatus, approvedTo int,
	st *workv1alpha1.RolloutStatus, d *Decision) (bool, string, string) {
	succeeded, live := 0, 0
	var names []string
	for _, c := range g.clusters {
		if c.Lost {
			continue
		}
		live++
		names = append(names, c.Name)
		if v := verdicts[c.Name]; c.Running == in.Target && v.Verdict == workv1alpha1.VerdictSucceeded {
			succeeded++
		}
	}
	if len(g.clusters) == 0 {
		// A group with no cluster is passed, unless it had clusters in
		// this rollout and lost them all (its canary failed over): then
		// nothing proved the revision there, and a person decides.
		if hadMembers(in, g.name) && approvedTo < gi {
			return false, ReasonGroupEmptied, fmt.Sprintf("revision %d waits: group %s lost all its clusters during the rollout; to go on without it: kubectl flotilla rollout approve %s--group %s",
				in.Target, g.name, templateArg(in), g.name)
		}
		return true, "", ""
	}
	if live == 0 {
		return false, "", fmt.Sprintf("revision %d waits in group %s: none of its %d clusters is Ready", in.Target, g.name, len(g.clusters))
	}
	if succeeded < live {
		return false, "", fmt.Sprintf("revision %d in group %s: %d of %d clusters succeeded", in.Target, g.name, succeeded, live)
	}
	if g.analysis != nil {
		as := workv1alpha1.AnalysisStatus{Group: g.name, Phase: workv1alpha1.AnalysisInconclusive, Message: "the hub runs no analyses"}
		if in.Analyzer != nil {
			as = in.Analyzer(g.name, *g.analysis, names)
		}
		as.Group = g.name
		st.Analysis = &as
		switch as.Phase {
		case workv1alpha1.AnalysisSuccessful:
		case workv1alpha1.AnalysisFailed:
			st.Phase, st.HaltedTime, st.Reason = workv1alpha1.RolloutPhaseHalted, ptrTime(in.Now), ReasonAnalysisFailed
			st.Message = statuslimits.Text(fmt.Sprintf("revision %d halted in group %s: its analysis failed: %s; no further cluster receives it", in.Target, g.name, as.Message), 4096)
			d.Events = append(d.Events, Event{"Warning", ReasonAnalysisFailed, st.Message})
			return false, "", st.Message
		case workv1alpha1.AnalysisInconclusive:
			if approvedTo < gi {
				return false, ReasonAnalysisPaused, statuslimits.Text(fmt.Sprintf("revision %d waits in group %s: its analysis is inconclusive (%s); to go on: kubectl flotilla rollout approve %s--group %s",
					in.Target, g.name, as.Message, templateArg(in), g.name), 4096)
			}
		default:
			return false, "", fmt.Sprintf("revision %d in group %s: every cluster succeeded, the analysis runs (%d successes)", in.Target, g.name, as.Successes)
		}
	}
	if g.approval && approvedTo < gi {
		return false, ReasonWaitingApproval, fmt.Sprintf("revision %d succeeded in group %s and waits for approval: kubectl flotilla rollout approve %s--group %s", in.Target, g.name, templateArg(in), g.name)
	}
	return true, "", ""
}

func templateArg(in Input) string {
	if in.Template == "" {
		return ""
	}
	return in.Template + " "
}

// hadMembers: the last status of this revision had a cluster in group.
func hadMembers(in Input, group string) bool {
	if in.Previous == nil || in.Previous.Revision != in.Target {
		return false
	}
	if in.Previous.Reason == ReasonGroupEmptied && in.Previous.Group == group {
		return true
	}
	for _, c := range in.Previous.Clusters {
		if c.Group == group {
			return true
		}
	}
	return false
}

func ptrTime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}

// rollback decides the revisions of a halted rollout: with no rollback
// (or no stable revision to return to) every cluster keeps what it runs;
// otherwise the clusters on the halted revision return to the stable one,
// all at once or a batch at a time.
func rollback(in Input, gs []group, verdicts map[string]*workv1alpha1.ClusterRolloutStatus, deadline time.Duration,
	st *workv1alpha1.RolloutStatus, d *Decision, requeue *[]time.Duration) {
	now := metav1.NewTime(in.Now)
	rb := in.Strategy.Rollback
	for _, c := range in.Clusters {
		keep(d.Revisions, &c, in.Stable)
	}
	if rb == nil || in.Stable == 0 {
		if rb != nil && in.Stable == 0 && st.Phase == workv1alpha1.RolloutPhaseHalted && !strings.Contains(st.Message, "no completed revision") {
			st.Message = statuslimits.Text(st.Message+"; there is no completed revision to roll back to", 4096)
		}
		return
	}
	batch := len(in.Clusters)
	if rb.Type == policyv1alpha1.RollbackProgressive {
		batch = 1
		for _, g := range gs {
			batch = max(batch, min(g.maxConcurrency, len(g.clusters)))
		}
	}
	// Reverse order: the last updated return first.
	var onTarget []*Cluster
	inFlight := 0
	for i := len(gs) - 1; i >= 0; i-- {
		for j := len(gs[i].clusters) - 1; j >= 0; j-- {
			c := gs[i].clusters[j]
			cs := verdicts[c.Name]
			if c.Running == in.Target {
				onTarget = append(onTarget, c)
				continue
			}
			if cs.Verdict == workv1alpha1.VerdictRolledBack && c.Running == in.Stable && c.Health != workv1alpha1.ResourceHealthy && !c.Lost &&
				cs.UpdatedTime != nil && in.Now.Sub(cs.UpdatedTime.Time) <= deadline {
				inFlight++
				*requeue = append(*requeue, deadline-in.Now.Sub(cs.UpdatedTime.Time)+time.Second)
			}
		}
	}
	for _, c := range onTarget {
		if inFlight >= batch {
			break
		}
		d.Revisions[c.Name] = in.Stable
		cs := verdicts[c.Name]
		cs.Verdict, cs.UpdatedTime, cs.Revision = workv1alpha1.VerdictRolledBack, &now, in.Stable
		cs.Message = fmt.Sprintf("rolled back from revision %d to %d", in.Target, in.Stable)
		cs.HealthySince, cs.LastHealthyTime = nil, nil
		inFlight++
	}
	remaining := 0
	for _, c := range onTarget {
		if d.Revisions[c.Name] == in.Target {
			remaining++
		}
	}
	prevPhase := st.Phase
	if remaining > 0 || inFlight > 0 {
		st.Phase, st.Reason = workv1alpha1.RolloutPhaseRollingBack, ReasonRollingBack
	} else {
		st.Phase, st.Reason = workv1alpha1.RolloutPhaseRolledBack, ReasonRolledBack
	}
	if st.Phase != prevPhase {
		switch st.Phase {
		case workv1alpha1.RolloutPhaseRollingBack:
			d.Events = append(d.Events, Event{"Normal", ReasonRollingBack, fmt.Sprintf("revision %d halted: rolling back to revision %d", in.Target, in.Stable)})
		case workv1alpha1.RolloutPhaseRolledBack:
			d.Events = append(d.Events, Event{"Normal", ReasonRolledBack, fmt.Sprintf("revision %d halted: every cluster is back on revision %d", in.Target, in.Stable)})
		}
	}
}

func sortClusters(cs []workv1alpha1.ClusterRolloutStatus, order map[string]int) {
	slices.SortFunc(cs, func(a, b workv1alpha1.ClusterRolloutStatus) int {
		if order != nil {
			if c := cmp.Compare(order[a.Group], order[b.Group]); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.ClusterName, b.ClusterName)
	})
}

func boundClusters(cs []workv1alpha1.ClusterRolloutStatus) []workv1alpha1.ClusterRolloutStatus {
	if len(cs) > workv1alpha1.RolloutStatusMaxClusters {
		return cs[:workv1alpha1.RolloutStatusMaxClusters]
	}
	return cs
}

// Conditions are the binding's RolloutProgressing, RolloutHalted and
// RolloutComplete conditions for st.
func Conditions(st workv1alpha1.RolloutStatus, generation int64) []metav1.Condition {
	reason := st.Reason
	if reason == "" {
		reason = string(st.Phase)
	}
	msg := st.Message
	cond := func(t string, ok bool) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation}
	}
	p := st.Phase
	return []metav1.Condition{
		cond(workv1alpha1.BindingConditionRolloutProgressing, p == workv1alpha1.RolloutPhaseProgressing || p == workv1alpha1.RolloutPhaseRollingBack),
		cond(workv1alpha1.BindingConditionRolloutHalted, halted(p)),
		cond(workv1alpha1.BindingConditionRolloutComplete, p == workv1alpha1.RolloutPhaseComplete),
	}
}

// OwnsCopy says whether the rollout, not application failover, decides
// what happens to cluster's copy: it runs the newest revision while that
// revision is still going through its gates (or rolling back). An
// Unhealthy copy there halts the rollout (and is rolled back) instead of
// being failed over to another cluster. A halted rollout without
// rollback leaves its copies to failover, whose replacement runs the
// stable revision.
func OwnsCopy(st *workv1alpha1.RolloutStatus, cluster string) bool {
	if st == nil || st.Revision == st.StableRevision {
		return false
	}
	switch st.Phase {
	case workv1alpha1.RolloutPhaseProgressing, workv1alpha1.RolloutPhaseWaiting, workv1alpha1.RolloutPhaseRollingBack:
	default:
		return false
	}
	for _, c := range st.Clusters {
		if c.ClusterName == cluster {
			return c.Revision == st.Revision
		}
	}
	return false
}

// Updating says whether the rollout is changing clusters now: a revision
// still in its gates has clusters updating or soaking, or is rolling back.
// Failback waits for it (one disruption budget for changes and moves).
func Updating(st *workv1alpha1.RolloutStatus) bool {
	if st == nil || st.Revision == st.StableRevision {
		return false
	}
	if st.Phase == workv1alpha1.RolloutPhaseRollingBack {
		return true
	}
	if st.Phase != workv1alpha1.RolloutPhaseProgressing && st.Phase != workv1alpha1.RolloutPhaseWaiting {
		return false
	}
	for _, c := range st.Clusters {
		if c.Revision == st.Revision && (c.Verdict == workv1alpha1.VerdictUpdating || c.Verdict == workv1alpha1.VerdictSoaking) {
			return true
		}
	}
	return false
}
