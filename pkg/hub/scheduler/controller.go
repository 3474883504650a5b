// Package scheduler is the hub's scheduler: it decides which clusters a
// binding runs on, and how many replicas each gets, when the placement
// changes, the replicas stop adding up (which is how an eviction becomes a
// failover), a scheduled cluster is deleted, or a person asks. The decision
// itself is the pure function in package core; this controller decides
// when to call it and writes the result.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/bindingstatus"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
	"github.com/flotilla-io/flotilla/pkg/priorityqueue"
	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// AnnotationScheduledPlacement holds the placement (JSON) of the last
// schedule, so a placement change is seen as one.
const AnnotationScheduledPlacement = "scheduler.flotilla.io/placement"

// Event reasons and condition reasons, Karmada's names where it has them.
const (
	EventScheduleSucceed = "ScheduleBindingSucceed"
	EventScheduleFailed  = "ScheduleBindingFailed"

	ReasonScheduled      = "BindingScheduled"
	ReasonNoClusterFit   = "NoClusterFit"
	ReasonSchedulerError = "SchedulerError"
)

// Schedule types, the label of the scheduling metrics: why a binding was
// scheduled.
const (
	TypeFirstSchedule    = "FirstSchedule"
	TypeUnschedulable    = "RetryUnschedulable"
	TypePlacementChanged = "PlacementChanged"
	TypeRescheduleAsked  = "RescheduleTriggered"
	TypeClusterDeleted   = "ClusterDeleted"
	TypeReplicasChanged  = "ReplicasChanged"
	TypeSpreadViolated   = "SpreadConstraintViolated"
	TypeDuplicated       = "DuplicatedReconcile"
)

// Options tune the scheduler.
type Options struct {
	// EvictionHistoryTTL is how long a cluster a binding was evicted from
	// is avoided for it.
	EvictionHistoryTTL time.Duration
	Clock              clock.Clock
	Metrics            *hubmetrics.Metrics
	Recorder           record.EventRecorder
	// Statuses writes the binding status the scheduler shares with the
	// binding controller (a new binding's first status in one write); nil
	// writes at once.
	Statuses *bindingstatus.Writer
	// AssumptionTTL is how long a placement the scheduler made is
	// subtracted from its cluster's room at most, waiting for the cluster
	// to report it (overcommit protection, core.Assumptions); 0 is
	// core.DefaultAssumptionTTL, negative turns the protection off.
	AssumptionTTL time.Duration
}

// Controller schedules bindings.
type Controller struct {
	opts     Options
	bindings *workobjects.Bindings
	clusters clusterlisters.ClusterLister
	// summaries remembers whose resource summary is out of range, once
	// per Cluster update; summaryProblem is its Check, made once.
	summaries      core.SummaryVerdicts
	summaryProblem func(*clusterv1alpha1.Cluster) error
	// assumed is the overcommit protection's ledger (assumed.go).
	assumed *core.Assumptions
	synced  []cache.InformerSynced
	// groups are the workload affinity groups' index, locks and
	// assumed placements (workloadaffinity.go).
	groups *workloadGroups
	queue  workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the scheduler to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Statuses == nil {
		opts.Statuses = bindingstatus.NewWriter(client, factory, 0, opts.Clock)
	}
	bindings, bindingInformers := workobjects.NewBindings(client, factory)
	clusters := factory.Cluster().V1alpha1().Clusters()
	c := &Controller{opts: opts,
		bindings: bindings,
		clusters: clusters.Lister(),
		synced:   workobjects.Synced(append(bindingInformers, clusters.Informer())...),
		// Higher schedulePriority first, ties in arrival order; retries
		// and delayed keys too, once they are due.
		queue: priorityqueue.NewRateLimitingQueue("scheduler", bindings.Priority),
	}
	c.summaryProblem = c.summaries.Check
	c.assumed = newAssumptions(opts)
	c.groups = newWorkloadGroups(bindingInformers[0]) // the namespaced bindings' informer
	c.watchWorkloadGroups(bindingInformers[0])
	enqueue := workobjects.EnqueueKey(c.queue.Add)
	for _, inf := range bindingInformers {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
			DeleteFunc: c.forgetBinding,
			UpdateFunc: func(o, n any) {
				c.observeBinding(n) // a copy up may release an assumption
				// Status writes (ours and the binding controller's) change
				// nothing the scheduler reads.
				om, nm := o.(metav1.Object), n.(metav1.Object)
				if om.GetGeneration() != nm.GetGeneration() || nm.GetDeletionTimestamp() != nil ||
					om.GetAnnotations()[AnnotationScheduledPlacement] != nm.GetAnnotations()[AnnotationScheduledPlacement] {
					enqueue(n)
				}
			}})
	}
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(o, n any) {
			c.observeCluster(o.(*clusterv1alpha1.Cluster), n.(*clusterv1alpha1.Cluster))
			if clusterChangeMatters(o.(*clusterv1alpha1.Cluster), n.(*clusterv1alpha1.Cluster)) {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cl, ok := obj.(*clusterv1alpha1.Cluster); ok {
				c.summaries.Forget(cl.Name)
				c.assumed.ForgetCluster(cl.Name)
			}
			c.enqueueAll()
		},
	})
	return c
}

// clusterChangeMatters reports whether a Cluster update can change a
// scheduling decision: what the filters and the spread read.
func clusterChangeMatters(o, n *clusterv1alpha1.Cluster) bool {
	return !apiequality.Semantic.DeepEqual(o.Labels, n.Labels) || !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		!apiequality.Semantic.DeepEqual(o.Status.APIEnablements, n.Status.APIEnablements) ||
		!quantities.SameSummary(o.Status.ResourceSummary, n.Status.ResourceSummary) || // the agent's: not Quantity.Cmp
		readyStatus(o) != readyStatus(n) // the filter reads Ready until the taint lands
}

func readyStatus(c *clusterv1alpha1.Cluster) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); cond != nil {
		return cond.Status
	}
	return ""
}

func (c *Controller) enqueueAll() {
	c.bindings.Each(func(key string, _ *workv1alpha1.ResourceBindingSpec) { c.queue.Add(key) })
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("scheduler", ctx.Done(), c.synced...) {
		return
	}
	c.seedAssumptions()
	if c.assumed != nil {
		go c.expireAssumptions(ctx)
	}
	queueworker.Run(ctx, "scheduler", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.syncBinding(ctx, key, binding)
	if conflict := (*placementConflict)(nil); !errors.As(err, &conflict) {
		return err
	}
	// Another write of the binding came between our read and our
	// placement (on a failover, the status patches that follow the
	// eviction): decide again at once from the binding as stored. A
	// requeue would wait for its backoff and for the cache to catch up, on
	// every failover's path (docs/benchmarks.md, the chain after
	// detection). Once: a second conflict goes back to the queue.
	binding, err = c.bindings.Read(ctx, key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncBinding(ctx, key, binding)
}

// placementConflict: the placement's write conflicted with another write
// of the binding.
type placementConflict struct{ err error }

func (e *placementConflict) Error() string { return e.err.Error() }
func (e *placementConflict) Unwrap() error { return e.err }

// syncBinding schedules binding (read from the cache, or as stored after a
// conflict) if it needs it.
func (c *Controller) syncBinding(ctx context.Context, key string, binding *workv1alpha1.ResourceBinding) error {
	if binding.DeletionTimestamp != nil || binding.Spec.Placement == nil {
		return nil
	}
	// With our held status (a new binding's Scheduled waits for its
	// Works, bindingstatus) and our last write.
	binding = c.opts.Statuses.View(binding)
	clusters, err := c.clusters.List(labels.Everything())
	if err != nil {
		return err
	}
	defer c.requeueAtUnblock(key, binding)
	scheduleType := Trigger(binding, clusters)
	if scheduleType == "" {
		if binding.Status.SchedulerObservedGeneration != binding.Generation {
			// Nothing to move, but say the current spec was seen: the
			// graceful eviction controller waits for it.
			updated := binding.Status.DeepCopy()
			updated.SchedulerObservedGeneration = binding.Generation
			return c.opts.Statuses.Write(ctx, binding, author, schedulerPart(updated), bindingstatus.Settled)
		}
		return c.refreshBlockNote(ctx, binding)
	}
	return c.schedule(ctx, binding, clusters, scheduleType)
}

// Trigger says why binding must be scheduled now, or "" when its current
// placement stands. Healthy clusters keep their replicas: a binding is not
// rescheduled merely because a better answer exists.
func Trigger(binding *workv1alpha1.ResourceBinding, clusters []*clusterv1alpha1.Cluster) string {
	spec, status := &binding.Spec, &binding.Status
	scheduled := meta.FindStatusCondition(status.Conditions, workv1alpha1.BindingConditionScheduled)
	switch {
	case scheduled == nil:
		return TypeFirstSchedule
	case scheduled.Status != metav1.ConditionTrue:
		return TypeUnschedulable
	case binding.Annotations[AnnotationScheduledPlacement] != placementJSON(spec.Placement):
		return TypePlacementChanged
	case spec.RescheduleTriggeredAt != nil && (status.LastScheduledTime == nil || spec.RescheduleTriggeredAt.After(status.LastScheduledTime.Time)):
		return TypeRescheduleAsked
	case scheduledClusterGone(spec.Clusters, clusters):
		return TypeClusterDeleted
	case !replicasAddUp(spec):
		return TypeReplicasChanged
	case tooFewClusters(spec):
		return TypeSpreadViolated
	case duplicated(spec):
		// Duplicated objects go to every cluster that fits; the decision is
		// cheap and keeps what runs, so make it on every change.
		return TypeDuplicated
	}
	return ""
}

func placementJSON(p *policyv1alpha1.Placement) string {
	if p == nil {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// replicaSchedulingChanged: the placement's replica scheduling differs
// from the one last scheduled with (recorded in the annotation).
func replicaSchedulingChanged(binding *workv1alpha1.ResourceBinding) bool {
	last := binding.Annotations[AnnotationScheduledPlacement]
	if last == "" {
		return false
	}
	var old policyv1alpha1.Placement
	if err := json.Unmarshal([]byte(last), &old); err != nil {
		return true
	}
	return !apiequality.Semantic.DeepEqual(old.ReplicaScheduling, binding.Spec.Placement.ReplicaScheduling)
}

func scheduledClusterGone(targets []workv1alpha1.TargetCluster, clusters []*clusterv1alpha1.Cluster) bool {
	for _, t := range targets {
		i := slices.IndexFunc(clusters, func(c *clusterv1alpha1.Cluster) bool { return c.Name == t.Name })
		if i < 0 || clusters[i].DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

func duplicated(spec *workv1alpha1.ResourceBindingSpec) bool {
	rs := spec.Placement.ReplicaScheduling
	return spec.Replicas == 0 || rs == nil || rs.ReplicaSchedulingType != policyv1alpha1.ReplicaSchedulingTypeDivided
}

// replicasAddUp: Divided replicas must sum to the desired count, Duplicated
// clusters must each run it.
func replicasAddUp(spec *workv1alpha1.ResourceBindingSpec) bool {
	if duplicated(spec) {
		for _, t := range spec.Clusters {
			if t.Replicas != spec.Replicas {
				return false
			}
		}
		return true
	}
	var sum int32
	for _, t := range spec.Clusters {
		sum += t.Replicas
	}
	return sum == spec.Replicas
}

// tooFewClusters: after an eviction the clusters may no longer meet a
// cluster spread constraint's minimum (seed 001).
func tooFewClusters(spec *workv1alpha1.ResourceBindingSpec) bool {
	for _, sc := range spec.Placement.SpreadConstraints {
		if (sc.SpreadByField == policyv1alpha1.SpreadByFieldCluster || sc.SpreadByField == "" && sc.SpreadByLabel == "") &&
			int32(len(spec.Clusters)) < sc.MinGroups {
			return true
		}
	}
	return false
}

func (c *Controller) schedule(ctx context.Context, binding *workv1alpha1.ResourceBinding, clusters []*clusterv1alpha1.Cluster, scheduleType string) (err error) {
	logger := klog.FromContext(ctx).WithValues("binding", workobjects.Key(binding), "scheduleType", scheduleType)
	// A group's bindings are decided and written one at a time (see
	// workloadGroups); a binding in no group takes no lock.
	defer c.groups.lock(binding)()
	now := c.opts.Clock.Now()
	start := time.Now()
	in := core.Input{WorkloadAffinity: c.workloadAffinity(binding), Key: workobjects.Key(binding), Spec: &binding.Spec, Clusters: clusters,
		Now: now, EvictionHistoryTTL: c.opts.EvictionHistoryTTL,
		ObservedAffinityName: binding.Status.SchedulerObservedAffinityName,
		// Only a person's explicit request starts over (first term, fresh
		// division); every other trigger keeps what runs.
		Fresh: scheduleType == TypeRescheduleAsked,
		// So does a change of how replicas are divided (weights,
		// preference): the new division is what was asked for.
		Rebalance:      scheduleType == TypePlacementChanged && replicaSchedulingChanged(binding),
		RestoreRemoved: scheduleType == TypePlacementChanged,
		SummaryProblem: c.summaryProblem}
	// The room the ledger leaves, and the result assumed at once.
	result, undoAssumption, decideErr := c.decide(&in, &binding.Spec)
	decided := time.Now()
	defer func() {
		// An unschedulable binding returns nil (nothing to retry); the
		// metric still counts it as unschedulable.
		outcome := err
		if decideErr != nil {
			outcome = decideErr
		}
		c.observe(scheduleType, start, decided, outcome)
	}()
	if err := decideErr; err != nil {
		var fit *core.FitError
		reason := ReasonSchedulerError
		if errors.As(err, &fit) {
			reason = ReasonNoClusterFit
		}
		logger.Info("Binding cannot be scheduled", "reason", reason, "message", err.Error())
		if statusErr := c.setScheduled(ctx, binding, metav1.ConditionFalse, reason, err.Error(), nil, "", decisionOf(in), bindingstatus.Settled); statusErr != nil {
			return statusErr
		}
		if reason == ReasonNoClusterFit {
			// Not an error to retry: a Cluster change brings the binding back.
			return nil
		}
		return err
	}
	placement := placementJSON(binding.Spec.Placement)
	stored := binding
	newSpec := ApplyResult(&binding.Spec, result.Clusters, clusters, metav1.NewTime(now), scheduleType)
	changed := !apiequality.Semantic.DeepEqual(newSpec.Clusters, binding.Spec.Clusters) ||
		!apiequality.Semantic.DeepEqual(newSpec.GracefulEvictionTasks, binding.Spec.GracefulEvictionTasks) ||
		binding.Annotations[AnnotationScheduledPlacement] != placement
	if changed {
		updated := binding.DeepCopy()
		updated.Spec = *newSpec
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[AnnotationScheduledPlacement] = placement
		if stored, err = c.bindings.Update(ctx, updated); err != nil {
			undoAssumption()
			if apierrors.IsConflict(err) {
				return &placementConflict{err}
			}
			return err
		}
		c.assumed.Confirm(workobjects.Key(binding), stored.Generation)
		c.opts.Statuses.Observe(stored)
		c.groups.assume(stored)
		msg := "Scheduled to " + describe(result.Clusters)
		removed, shrunk := splitPlaced(newTasks(binding.Spec.GracefulEvictionTasks, newSpec.GracefulEvictionTasks), result.Clusters)
		if len(removed) > 0 {
			msg += fmt.Sprintf("; removing %v gracefully (their copies stay until the new placement is healthy)", removed)
		}
		if len(shrunk) > 0 {
			msg += fmt.Sprintf("; shrinking %v gracefully (they keep their old replicas until the new placement is healthy)", shrunk)
		}
		logger.Info("Binding scheduled", "clusters", describe(result.Clusters), "message", msg)
		if scheduleType != TypeFirstSchedule {
			// A new binding's placement is on its Scheduled condition; an
			// event for each of 10,000 new bindings is a write apiece.
			c.event(binding, "Normal", EventScheduleSucceed, msg)
		}
	}
	// A new placement waits for the binding controller to make its Works:
	// the condition goes with that status (bindingstatus holds it for a
	// binding that has never shown one).
	stage := bindingstatus.Settled
	if changed && len(result.Clusters) > 0 {
		stage = bindingstatus.HubStage
	}
	scheduledAt := servedAt(&binding.Spec, scheduleType, now)
	if !changed && scheduleType == TypeDuplicated {
		// A routine re-check that changed nothing is not a new schedule.
		scheduledAt = nil
	}
	return c.setScheduled(ctx, stored, metav1.ConditionTrue, ReasonScheduled,
		"scheduled to "+describe(result.Clusters)+blockNote(&binding.Spec, now), scheduledAt, result.AffinityName, decisionOf(in), stage)
}

// decisionOf returns how to get the decision of in when a status write
// needs it: the same pure decision again, recording each cluster's
// verdict. Recording costs about three times a plain decision (see
// BenchmarkScheduleRecordDecision), and most decisions (a Duplicated
// binding re-checked on every cluster change) write nothing.
func decisionOf(in core.Input) func() *workv1alpha1.SchedulingDecision {
	return func() *workv1alpha1.SchedulingDecision {
		in.RecordDecision = true
		result, err := core.Schedule(in)
		var fit *core.FitError
		if errors.As(err, &fit) {
			return fit.Decision
		}
		return result.Decision
	}
}

// ApplyResult returns spec with the scheduling result written: a cluster
// the result drops that is still in the fleet (and not being deleted) gets
// a graceful eviction task in the same update, so its copy stays until the
// new placement is healthy; a removal is not a failure, so it leaves no
// eviction history. A cluster placed again while the scheduler's own task
// for it is open keeps its copy: the task is dropped. A reschedule someone
// asked for also shrinks kept clusters gracefully (placedTasks), and its
// tasks carry spec.rescheduleReason. spec is not changed.
func ApplyResult(spec *workv1alpha1.ResourceBindingSpec, result []workv1alpha1.TargetCluster,
	clusters []*clusterv1alpha1.Cluster, now metav1.Time, scheduleType string) *workv1alpha1.ResourceBindingSpec {
	out := spec.DeepCopy()
	out.Clusters = result
	placed := func(name string) bool {
		return slices.ContainsFunc(result, func(t workv1alpha1.TargetCluster) bool { return t.Name == name })
	}
	var before []string
	for _, t := range spec.Clusters {
		before = append(before, t.Name)
	}
	// Placed clusters: a graceful shrink keeps the old count (shrink.go).
	reason := taskReason(spec, scheduleType)
	out.GracefulEvictionTasks = placedTasks(spec, result, now, scheduleType, reason, before)
	for _, t := range spec.Clusters {
		if placed(t.Name) || slices.ContainsFunc(out.GracefulEvictionTasks, func(task workv1alpha1.GracefulEvictionTask) bool {
			return task.FromCluster == t.Name
		}) {
			continue
		}
		// A cluster leaving the fleet takes its copy with it: no task.
		i := slices.IndexFunc(clusters, func(c *clusterv1alpha1.Cluster) bool { return c.Name == t.Name })
		if i < 0 || clusters[i].DeletionTimestamp != nil {
			continue
		}
		var replicas *int32 // nil for kinds without replicas
		if spec.Replicas > 0 {
			replicas = &t.Replicas
		}
		out.GracefulEvictionTasks = append(out.GracefulEvictionTasks, workv1alpha1.GracefulEvictionTask{
			FromCluster: t.Name,
			PurgeMode:   policyv1alpha1.PurgeModeGracefully,
			Replicas:    replicas,
			Reason:      reason,
			Producer:    workv1alpha1.EvictionProducerScheduler,
			Message: fmt.Sprintf("the scheduler took the cluster out of the placement (%s); its copy stays until the new placement is healthy",
				scheduleType),
			ClustersBeforeFailover: before,
			CreationTimestamp:      &now,
		})
	}
	return out
}

// newTasks names the clusters of tasks in after that are not in before.
func newTasks(before, after []workv1alpha1.GracefulEvictionTask) []string {
	var out []string
	for _, t := range after {
		if !slices.ContainsFunc(before, func(b workv1alpha1.GracefulEvictionTask) bool { return b.FromCluster == t.FromCluster }) {
			out = append(out, t.FromCluster)
		}
	}
	return out
}

// observe records one scheduling attempt: the decision's duration
// (decided) and, once the result is written, the whole attempt's.
func (c *Controller) observe(scheduleType string, start, decided time.Time, err error) {
	m := c.opts.Metrics
	if m == nil {
		return
	}
	result := "scheduled"
	var fit *core.FitError
	switch {
	case errors.As(err, &fit):
		result = "unschedulable"
	case err != nil:
		result = "error"
	}
	m.ScheduleAttempts.WithLabelValues(result, scheduleType).Inc()
	m.ScheduleLatency.WithLabelValues(result, scheduleType).Observe(decided.Sub(start).Seconds())
	m.E2ESchedulingLatency.WithLabelValues(result, scheduleType).Observe(time.Since(start).Seconds())
}

func (c *Controller) event(binding *workv1alpha1.ResourceBinding, eventType, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(binding, eventType, reason, msg) // see workobjects.FromClusterBinding
	}
}

// describe lists targets for the Scheduled message, "member1(2), member2(1)",
// bounded however large the fleet: "…, and 37 more clusters" past
// statuslimits.MaxSummary/2 characters (the rest of the message, the
// blocked clusters, gets the other half).
func describe(targets []workv1alpha1.TargetCluster) string {
	if len(targets) == 0 {
		return "no cluster"
	}
	parts := make([]string, 0, len(targets))
	for _, t := range targets {
		parts = append(parts, fmt.Sprintf("%s(%d)", t.Name, t.Replicas))
	}
	return statuslimits.Join(parts, ", ", statuslimits.MaxSummary/2, "clusters")
}

// setScheduled records the outcome in the binding's status; a failure is
// recorded once per distinct message, not on every retry. decision, when
// not nil, gives status.schedulingDecision, asked for only when the status
// is written anyway: a decision that differs alone (a cluster's taint
// changed) is no reason to write, or a health change would cost a write
// per binding of the fleet.
func (c *Controller) setScheduled(ctx context.Context, binding *workv1alpha1.ResourceBinding, status metav1.ConditionStatus,
	reason, message string, scheduledAt *time.Time, affinityName string, decision func() *workv1alpha1.SchedulingDecision, stage bindingstatus.Stage) error {
	updated := binding.DeepCopy()
	// Its parts are bounded where they are made (describe, the fit
	// message); this only keeps a message that still grew too long from
	// failing the whole status write.
	message = statuslimits.Text(message, 2*statuslimits.MaxSummary)
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: workv1alpha1.BindingConditionScheduled,
		Status: status, Reason: reason, Message: message, ObservedGeneration: binding.Generation})
	updated.Status.SchedulerObservedGeneration = binding.Generation
	if scheduledAt != nil {
		t := metav1.NewTime(*scheduledAt)
		updated.Status.LastScheduledTime = &t
	}
	if status == metav1.ConditionTrue {
		// The term the current result came from: the next schedule
		// resumes from it.
		updated.Status.SchedulerObservedAffinityName = affinityName
	}
	if status == metav1.ConditionFalse {
		if old := meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled); old == nil || old.Message != message {
			c.event(binding, "Warning", EventScheduleFailed, message)
		}
	}
	// updated still carries the old decision, so this compares without it.
	if apiequality.Semantic.DeepEqual(updated.Status, binding.Status) {
		return nil
	}
	if decision != nil {
		if d := decision(); d != nil {
			updated.Status.SchedulingDecision = d
		}
	}
	return c.opts.Statuses.Write(ctx, binding, author, schedulerPart(&updated.Status), stage)
}

// author names the scheduler's part of a binding status.
const author = "scheduler"

// schedulerPart sets the scheduler's fields of a binding status to those
// of status: all of them, so a later part (which replaces a held one)
// keeps what an earlier one set.
func schedulerPart(status *workv1alpha1.ResourceBindingStatus) bindingstatus.Part {
	scheduled := meta.FindStatusCondition(status.Conditions, workv1alpha1.BindingConditionScheduled)
	gen, at, affinity, decision := status.SchedulerObservedGeneration, status.LastScheduledTime, status.SchedulerObservedAffinityName, status.SchedulingDecision
	return func(s *workv1alpha1.ResourceBindingStatus) {
		if scheduled != nil {
			meta.SetStatusCondition(&s.Conditions, *scheduled)
		}
		s.SchedulerObservedGeneration, s.LastScheduledTime, s.SchedulerObservedAffinityName, s.SchedulingDecision = gen, at, affinity, decision
	}
}
