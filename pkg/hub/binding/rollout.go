package binding

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/render"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/rollout"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Analyzer runs a rollout group's analysis (rolloutanalysis.Runner's
// Observe); key names the binding, revision and group.
type Analyzer func(key string, spec policyv1alpha1.RolloutAnalysis, group string, clusters []string) workv1alpha1.AnalysisStatus

// Reasons of the rollout conditions the controller itself sets.
const (
	// ReasonRevisionNotRecorded: the new revision could not be stored, so
	// no cluster receives it (a staged rollout fails closed).
	ReasonRevisionNotRecorded = "RevisionNotRecorded"
	// EventRevisionMissing: a revision a cluster runs or returns to was
	// deleted by hand; that cluster's Work is left as it is.
	EventRevisionMissing = "RevisionMissing"
)

// defaultRevisionHistoryLimit is revisionHistoryLimit's default.
const defaultRevisionHistoryLimit = 10

// rolloutPlan is what a sync renders: per cluster the object and its
// revision. A cluster missing from objects gets no Work (its group has not
// been reached and there is no stable revision) or keeps its Work as it is
// (hold).
type rolloutPlan struct {
	decision rollout.Decision
	objects  map[string]*unstructured.Unstructured
	revs     map[string]int64
	hold     map[string]bool
	// generations: the template generation each kept revision was
	// recorded at (what a Work of that revision says it renders).
	generations map[int64]int64
	// failed: the revision could not be recorded; every Work is held.
	failed error
}

func strategyAll(s *policyv1alpha1.RolloutStrategy) bool {
	return s == nil || s.Type == "" || s.Type == policyv1alpha1.RolloutTypeAll
}

// planRollout records the template's object as a revision and decides,
// with rollout.Decide, which revision each target cluster renders. Nil
// (render the template as it is, everywhere) when the hub keeps no
// revisions.
func (c *Controller) planRollout(ctx context.Context, binding *workv1alpha1.ResourceBinding, annotations map[string]string,
	obj *unstructured.Unstructured, templateGeneration int64, reads *workReads) *rolloutPlan {
	if c.opts.Revisions == nil {
		return nil
	}
	strategy, inherited := c.effectiveStrategy(binding)
	var reviser ReplicaReviser = resourceinterpreter.Default
	if c.opts.Interpreter != nil {
		reviser = c.opts.Interpreter
	}
	content, err := revisionContent(obj, binding.Spec.Replicas > 0, reviser)
	var target int64
	if err == nil {
		target, err = c.opts.Revisions.Ensure(ctx, binding, content, templateGeneration, c.knownRevision(binding))
	}
	if err != nil {
		if strategyAll(strategy) {
			// All is what Flotilla always did: the change goes out even
			// when its revision cannot be numbered.
			klog.FromContext(ctx).Error(err, "Recording the template revision", "binding", workobjects.Key(binding))
			return nil
		}
		return &rolloutPlan{failed: fmt.Errorf("the template's new revision could not be recorded, so no cluster receives it: %w", err)}
	}
	prev := binding.Status.Rollout
	var stable int64
	clusters := make([]rollout.Cluster, 0, len(binding.Spec.Clusters))
	adopt := false
	for _, t := range render.Targets(binding) {
		cl := rollout.Cluster{Name: t.Name, Health: workv1alpha1.ResourceUnknown}
		if cluster, err := c.clusters.Get(t.Name); err == nil {
			cl.Labels = cluster.Labels
			if ready := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
				cl.Lost, cl.LostReason = true, "no Ready condition"
				if ready != nil {
					cl.LostReason = statuslimits.Text(ready.Reason+": "+ready.Message, 512)
				}
			}
		}
		if w := reads.get(t.Name); w != nil && w.DeletionTimestamp == nil && workobjects.OwnsWork(binding, w) {
			if v, ok := w.Annotations[workv1alpha1.AnnotationTemplateRevision]; ok {
				cl.Running, _ = strconv.ParseInt(v, 10, 64)
			} else {
				adopt = true // written by a hub that kept no revisions
				cl.Running = -1
			}
			cl.Health = workHealth(w)
			if inherited {
				cl.Health = worst(cl.Health, c.dependentsHealth(binding, t.Name))
			}
		}
		clusters = append(clusters, cl)
	}
	switch {
	case prev != nil:
		stable = prev.StableRevision
	case adopt:
		// What runs already is taken as complete: Flotilla before
		// revisions, or a policy that just gained a strategy.
		stable = target
	}
	for i := range clusters {
		if clusters[i].Running == -1 {
			clusters[i].Running = max(stable, 1)
		}
	}
	in := rollout.Input{Strategy: strategy, Target: target, Stable: stable, Previous: prev, Clusters: clusters, Now: c.opts.Clock.Now(),
		Approve: annotations[workv1alpha1.AnnotationRolloutApprove], Resume: annotations[workv1alpha1.AnnotationRolloutResume],
		Disruptions: len(binding.Spec.GracefulEvictionTasks), Template: templateArg(binding)}
	if inherited {
		in.MinSuccessTimeFloor = c.opts.DependencyMinSuccessTime
	}
	if c.opts.Hold != nil {
		in.Hold = c.opts.Hold()
	}
	if c.opts.Analyzer != nil {
		// A resume starts the analyses afresh (a Failed one would halt the
		// revision again at once).
		key := workobjects.Key(binding) + "@" + strconv.FormatInt(target, 10)
		if r := annotations[workv1alpha1.AnnotationRolloutResume]; r != "" {
			key += "#" + statuslimits.Text(r, 128)
		}
		in.Analyzer = func(group string, spec policyv1alpha1.RolloutAnalysis, names []string) workv1alpha1.AnalysisStatus {
			return c.opts.Analyzer(key+"/"+group, spec, group, names)
		}
	}
	if strategyAll(strategy) {
		in.Stable = target
	}
	d := rollout.Decide(in)
	plan := &rolloutPlan{decision: d, objects: map[string]*unstructured.Unstructured{}, revs: d.Revisions, hold: map[string]bool{},
		generations: map[int64]int64{}}
	for _, cr := range c.opts.Revisions.List(binding) {
		if g := revisionGeneration(cr); g > 0 {
			plan.generations[cr.Revision] = g
		}
	}
	keep := map[int64]bool{target: true, d.Stable: true}
	for _, cl := range clusters {
		keep[cl.Running] = true
	}
	for name, rev := range d.Revisions {
		if rev == target {
			plan.objects[name] = obj
			continue
		}
		o, err := c.opts.Revisions.Object(ctx, binding, rev)
		if err != nil || o == nil {
			plan.hold[name] = true
			msg := fmt.Sprintf("cluster %s: revision %d is gone (deleted by hand?); its Work is left as it is", name, rev)
			if err != nil {
				msg = fmt.Sprintf("cluster %s: reading revision %d: %v; its Work is left as it is", name, rev, err)
			}
			c.event(binding, "Warning", EventRevisionMissing, msg)
			continue
		}
		plan.objects[name] = o
	}
	limit := defaultRevisionHistoryLimit
	if strategy != nil && strategy.RevisionHistoryLimit != nil {
		limit = int(*strategy.RevisionHistoryLimit)
	}
	if err := c.opts.Revisions.Prune(ctx, binding, keep, limit); err != nil {
		klog.FromContext(ctx).Error(err, "Pruning template revisions", "binding", workobjects.Key(binding))
	}
	plan.decision.Status.Revisions = c.revisionHistory(binding, prev, &plan.decision.Status)
	return plan
}

// workHealth is the health the agent reported for the Work's current
// generation; Unknown when it has not applied it.
func workHealth(w *workv1alpha1.Work) workv1alpha1.ResourceHealth {
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
	if applied == nil || applied.Status != metav1.ConditionTrue || applied.ObservedGeneration != w.Generation || len(w.Status.ManifestStatuses) == 0 {
		return workv1alpha1.ResourceUnknown
	}
	if h := w.Status.ManifestStatuses[0].Health; h != "" {
		return h
	}
	return workv1alpha1.ResourceUnknown
}

// revisionHistory lists the kept revisions, newest first, each with how
// its rollout ended.
func (c *Controller) revisionHistory(binding *workv1alpha1.ResourceBinding, prev, st *workv1alpha1.RolloutStatus) []workv1alpha1.RevisionRecord {
	outcomes := map[int64]string{}
	if prev != nil {
		for _, r := range prev.Revisions {
			outcomes[r.Revision] = r.Outcome
		}
		if prev.Revision != st.Revision {
			o := string(prev.Phase)
			if prev.Phase == workv1alpha1.RolloutPhaseProgressing || prev.Phase == workv1alpha1.RolloutPhaseWaiting {
				o = "Superseded"
			}
			outcomes[prev.Revision] = o
		}
	}
	outcomes[st.Revision] = string(st.Phase)
	list := c.opts.Revisions.List(binding)
	out := make([]workv1alpha1.RevisionRecord, 0, len(list)+1)
	seen := false
	for i := len(list) - 1; i >= 0; i-- {
		cr := list[i]
		t := cr.CreationTimestamp
		if cr.Revision == st.Revision {
			seen = true
		}
		out = append(out, workv1alpha1.RevisionRecord{Revision: cr.Revision, TemplateGeneration: revisionGeneration(cr), Outcome: outcomes[cr.Revision], CreatedTime: &t})
	}
	if !seen { // just created; the cache has not seen it
		out = append([]workv1alpha1.RevisionRecord{{Revision: st.Revision, Outcome: outcomes[st.Revision]}}, out...)
	}
	if len(out) > 102 {
		out = out[:102]
	}
	return out
}

// requeueRollout brings the binding back when a soak ends or a deadline
// passes.
func (c *Controller) requeueRollout(key string, plan *rolloutPlan) {
	if plan != nil && plan.failed == nil && plan.decision.RequeueAfter > 0 {
		c.queue.AddAfter(key, plan.decision.RequeueAfter+100*time.Millisecond)
	}
}

// rolloutFailedStatus is the status of a rollout whose revision could not
// be recorded.
func rolloutFailedConditions(binding *workv1alpha1.ResourceBinding, err error) []metav1.Condition {
	msg := statuslimits.Text(err.Error(), statuslimits.MaxSummary)
	return []metav1.Condition{{Type: workv1alpha1.BindingConditionRolloutProgressing, Status: metav1.ConditionFalse, Reason: ReasonRevisionNotRecorded,
		Message: msg, ObservedGeneration: binding.Generation}}
}

// templateArg names the binding's template as kubectl flotilla rollout
// takes it.
func templateArg(binding *workv1alpha1.ResourceBinding) string {
	ref := metav1.GetControllerOf(binding)
	if ref == nil {
		return ""
	}
	if binding.Namespace == "" {
		return ref.Name + " --cluster-scoped"
	}
	return ref.Name + " -n " + binding.Namespace
}

// EnqueueAnalysis syncs the binding an analysis key (from the Analyzer:
// "<binding key>@<revision>/<group>") belongs to, when its result changed.
func (c *Controller) EnqueueAnalysis(key string) {
	if i := strings.LastIndex(key, "@"); i > 0 {
		c.queue.Add(key[:i])
	}
}

// effectiveStrategy is the binding's own rollout strategy, or, for a
// dependency without one (a ConfigMap or Secret a workload needs), the
// strategy of the first workload that needs it (spec.requiredBy, sorted)
// and has one: it rolls in that workload's groups, gated by the health of
// the workloads that need it (inherited).
func (c *Controller) effectiveStrategy(binding *workv1alpha1.ResourceBinding) (*policyv1alpha1.RolloutStrategy, bool) {
	if !strategyAll(binding.Spec.RolloutStrategy) {
		return binding.Spec.RolloutStrategy, false
	}
	for _, snap := range binding.Spec.RequiredBy {
		if dep, err := c.bindings.Get(snapshotKey(snap)); err == nil && !strategyAll(dep.Spec.RolloutStrategy) {
			return dep.Spec.RolloutStrategy, true
		}
	}
	return binding.Spec.RolloutStrategy, false
}

func snapshotKey(snap workv1alpha1.BindingSnapshot) string {
	return workobjects.Key(&metav1.ObjectMeta{Namespace: snap.Namespace, Name: snap.Name})
}

// dependentsHealth is the health, on cluster, of the workloads that need
// the binding's object there: Unhealthy if one is, Unknown if one has not
// reported, else Healthy.
func (c *Controller) dependentsHealth(binding *workv1alpha1.ResourceBinding, cluster string) workv1alpha1.ResourceHealth {
	out := workv1alpha1.ResourceHealthy
	for _, snap := range binding.Spec.RequiredBy {
		if !slices.ContainsFunc(snap.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == cluster }) {
			continue
		}
		dep, err := c.bindings.Get(snapshotKey(snap))
		h := workv1alpha1.ResourceUnknown
		if err == nil {
			for _, it := range dep.Status.AggregatedStatus {
				if it.ClusterName == cluster && it.Health != "" {
					h = it.Health
				}
			}
		}
		out = worst(out, h)
	}
	return out
}

// worst of two healths: Unhealthy, then Unknown, then Healthy.
func worst(a, b workv1alpha1.ResourceHealth) workv1alpha1.ResourceHealth {
	rank := func(h workv1alpha1.ResourceHealth) int {
		switch h {
		case workv1alpha1.ResourceUnhealthy:
			return 2
		case workv1alpha1.ResourceHealthy:
			return 0
		}
		return 1
	}
	if rank(a) >= rank(b) {
		if a == "" {
			return workv1alpha1.ResourceUnknown
		}
		return a
	}
	return b
}

// knownRevision is the highest revision the binding's status or Works
// name: revision numbers never go below it.
func (c *Controller) knownRevision(binding *workv1alpha1.ResourceBinding) int64 {
	var top int64
	if st := binding.Status.Rollout; st != nil {
		top = max(st.Revision, st.StableRevision)
	}
	works, _ := c.worksOf(binding)
	for _, w := range works {
		if n, err := strconv.ParseInt(w.Annotations[workv1alpha1.AnnotationTemplateRevision], 10, 64); err == nil {
			top = max(top, n)
		}
	}
	return top
}
