// Package execution is the agent's half of the Work flow: it watches the
// Works in its cluster's hub namespace, applies their manifests to the member
// with server-side apply, repairs drift, reports status and health back, and
// deletes (or releases) what it applied when a Work goes away. Only the agent
// leader runs it.
//
// Safety rules: a manifest is refused (never applied, never deleted) when
// the Work's source, as the hub recorded it, may not produce it or when it
// targets a protected namespace or a Flotilla kind (admission.go); a missing
// object is created with Create, never by an apply on a cached "absent", and
// every later write carries the UID it was decided on; an object without
// Flotilla's managed label is never changed (unless its Work says Overwrite);
// only an object the agent created is ever deleted, an adopted one is only
// released; a namespace the agent created on the way is never deleted;
// nothing is deleted because the hub is unreachable; an object whose Work
// vanished from the hub without the finalizer running is deleted (or
// released) only after a long grace period. The hub adds the execution
// finalizer when it creates a Work; the agent only ever removes it and
// applies nothing before it is there.
package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// Condition reasons on a Work.
const (
	ReasonAppliedSuccessful = "AppliedSuccessful"
	ReasonAppliedFailed     = "AppliedFailed"
	ReasonConflict          = "Conflict"
	ReasonAvailable         = "Available"
	ReasonNotAvailable      = "NotAvailable"
	ReasonNotApplied        = "NotApplied"
	// ReasonSuspendDispatching: the Work's policy suspends dispatching, so
	// the member objects are left exactly as they are.
	ReasonSuspendDispatching = "SuspendDispatching"
	ReasonDispatching        = "Dispatching"
	// ReasonRefused: at least one manifest was refused (admission.go);
	// it is not retried until the Work changes.
	ReasonRefused = "Refused"
	// ReasonWaitingForFinalizer: the Work lacks the execution finalizer
	// the hub adds, so nothing is applied yet (without it the agent could
	// not clean up after the Work).
	ReasonWaitingForFinalizer = "WaitingForFinalizer"
)

// Options configure a Controller.
type Options struct {
	// Namespace is the cluster's namespace on the hub (flotilla-es-<c>).
	Namespace string
	// FieldManager is the server-side apply field manager.
	FieldManager string
	// Workers is --concurrent-work-syncs.
	Workers int
	// OrphanGracePeriod is how long a managed member object whose Work is
	// gone from the hub (without the finalizer running) is kept.
	OrphanGracePeriod time.Duration
	Clock             clock.Clock
	Metrics           *agentmetrics.Metrics
	Recorder          record.EventRecorder
	// MayWrite, when set, is asked right before every write to the hub: a
	// leader whose term is over (leader.Check) must not report late.
	MayWrite func(context.Context) error
	// AgentNamespace is the agent's own namespace on the member (its
	// leader-election namespace): protected like SystemNamespaces.
	AgentNamespace string
	// AllowedSystemNamespaces are protected namespaces that Works may
	// nevertheless target (--allowed-system-namespaces).
	AllowedSystemNamespaces []string
	// AllowFlotillaKinds lets Works carry flotilla.io kinds
	// (--allow-flotilla-kinds).
	AllowFlotillaKinds bool
	// Interpreter judges health, reflects status and names the retained
	// fields, ResourceInterpreterCustomizations first (nil: the built-in
	// interpreter). A change of a customization re-reports every Work.
	Interpreter *resourceinterpreter.Interpreter
}

// Controller applies the Works of one cluster.
type Controller struct {
	opts       Options
	hub        flotillaclient.Interface
	works      worklisters.WorkLister
	worksSync  cache.InformerSynced
	member     dynamic.Interface
	memberKube kubernetes.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	objects    *objectWatcher
	// endpoints counts the ready endpoints of applied Services (nil
	// without a member clientset).
	endpoints *endpointCounter
	queue     workqueue.TypedRateLimitingInterface[string]
	admission admission
	// beforeWriteHook, when set (tests only), runs right before each write
	// to a member object, between the decision and the write.
	beforeWriteHook func(op string, obj *unstructured.Unstructured)
	// refusals maps a Work name to the refusals last reported for it, so
	// each is counted and announced once per change of the Work.
	refusals sync.Map

	namespaces sync.Map // namespaces known to exist on the member
	// written maps a Work name to the Work our last status write returned
	// and the resourceVersion it replaced: while the lister still holds
	// that older version, the written copy is the truth (no conflict, no
	// duplicate write).
	written     sync.Map
	orphanMu    sync.Mutex
	orphanSince map[string]time.Time
	stopCh      chan struct{}
	// stopInterpreterWatch unregisters from the Interpreter's changes.
	stopInterpreterWatch func()
}

// NewController returns a Controller. works is an informer on the Works in
// opts.Namespace; the caller starts it.
func NewController(hub flotillaclient.Interface, works cache.SharedIndexInformer, member dynamic.Interface, memberMetadata metadata.Interface,
	memberKube kubernetes.Interface, memberDiscovery discovery.DiscoveryInterface, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.FieldManager == "" {
		opts.FieldManager = "flotilla-agent"
	}
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	c := &Controller{
		opts: opts, hub: hub, works: worklisters.NewWorkLister(works.GetIndexer()), worksSync: works.HasSynced,
		member: member, memberKube: memberKube,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(memberDiscovery)),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
				&workqueue.TypedBucketRateLimiter[string]{Limiter: newBucket()},
			), workqueue.TypedRateLimitingQueueConfig[string]{Name: "work",
				Clock: slowTickers{WithTicker: clock.RealClock{}, min: queueTickerMin}}),
		orphanSince: map[string]time.Time{},
		stopCh:      make(chan struct{}),
		admission:   newAdmission(opts.AgentNamespace, opts.AllowedSystemNamespaces, opts.AllowFlotillaKinds),
	}
	c.objects = newObjectWatcher(member, memberMetadata, c.stopCh, c.onMemberEvent)
	if memberKube != nil {
		c.endpoints = newEndpointCounter(memberKube, func(work string) { c.queue.Add(work) })
	}
	// A changed rule changes what is reported (and retained) for objects
	// that did not change: sync every Work again.
	c.stopInterpreterWatch = opts.Interpreter.OnChange(func(schema.GroupVersionKind) {
		list, _ := c.works.Works(c.opts.Namespace).List(labels.Everything())
		for _, w := range list {
			c.queue.Add(w.Name)
		}
	})
	_, _ = works.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueWork,
		UpdateFunc: func(old, cur any) { c.enqueueWorkUpdate(old, cur) },
		DeleteFunc: c.enqueueWork,
	})
	return c
}

func (c *Controller) beforeWrite(op string, obj *unstructured.Unstructured) {
	if c.beforeWriteHook != nil {
		c.beforeWriteHook(op, obj)
	}
}

func (c *Controller) enqueueWork(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if w, ok := obj.(*workv1alpha1.Work); ok {
		c.queue.Add(w.Name)
	}
}

// enqueueWorkUpdate skips updates of status only (our own reports).
func (c *Controller) enqueueWorkUpdate(old, cur any) {
	o, ok1 := old.(*workv1alpha1.Work)
	n, ok2 := cur.(*workv1alpha1.Work)
	if ok2 {
		c.forgetWritten(n)
	}
	if ok1 && ok2 && o.Generation == n.Generation && equality.Semantic.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) &&
		slices.Equal(o.Finalizers, n.Finalizers) {
		return
	}
	c.enqueueWork(cur)
}

// onMemberEvent requeues the Work a changed or deleted member object came from.
func (c *Controller) onMemberEvent(obj *unstructured.Unstructured) {
	a := obj.GetAnnotations()
	if a[workv1alpha1.AnnotationWorkNamespace] == c.opts.Namespace && a[workv1alpha1.AnnotationWorkName] != "" {
		c.queue.Add(a[workv1alpha1.AnnotationWorkName])
	}
}

// Run processes Works until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	defer close(c.stopCh)
	defer c.stopInterpreterWatch()
	logger := klog.FromContext(ctx)
	logger.Info("Applying Works", "namespace", c.opts.Namespace, "workers", c.opts.Workers)
	if !cache.WaitForNamedCacheSync("work", ctx.Done(), c.worksSync) {
		return
	}
	var wg sync.WaitGroup
	if c.endpoints != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.endpoints.run(ctx.Done())
		}()
	}
	for range c.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.worker, time.Second)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		period := min(max(c.opts.OrphanGracePeriod/10, time.Second), 5*time.Minute)
		wait.UntilWithContext(ctx, c.sweepOrphans, period)
	}()
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if m := c.opts.Metrics; m != nil {
		m.WorksInFlight.Inc()
		defer m.WorksInFlight.Dec()
	}
	if err := c.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("Work sync failed; retrying with backoff", "work", klog.KRef(c.opts.Namespace, key), "err", err)
		}
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

type writtenWork struct {
	replaced string
	work     *workv1alpha1.Work
}

// forgetWritten drops the copy of our last status write once the lister
// holds that version or a newer one: from then on the lister is the truth.
// Without this every Work written once kept a second full copy in memory
// until its next sync (5,000 Works: 5,000 copies).
func (c *Controller) forgetWritten(cur *workv1alpha1.Work) {
	e, ok := c.written.Load(cur.Name)
	if !ok {
		return
	}
	if cmp, err := resourceversion.CompareResourceVersion(cur.ResourceVersion, e.(writtenWork).work.ResourceVersion); err == nil && cmp >= 0 {
		c.written.CompareAndDelete(cur.Name, e)
	}
}

// errRetry marks a sync whose Work needs another try later (a manifest
// failed), after its status has been written.
type errRetry struct{ failed []string }

func (e errRetry) Error() string { return "manifests failed: " + strings.Join(e.failed, "; ") }

func (c *Controller) sync(ctx context.Context, name string) error {
	work, err := c.works.Works(c.opts.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.refusals.Delete(name)
		c.written.Delete(name)
		c.endpoints.forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	if e, ok := c.written.Load(name); ok {
		if w := e.(writtenWork); w.replaced == work.ResourceVersion {
			work = w.work
		} else {
			c.written.Delete(name)
		}
	}
	if work.DeletionTimestamp != nil {
		return c.release(ctx, work)
	}
	if !slices.Contains(work.Finalizers, workv1alpha1.ExecutionFinalizer) {
		// The hub adds the finalizer when it creates a Work; the agent
		// may only remove it. The update that adds it requeues the Work.
		return c.waitForFinalizer(ctx, work)
	}

	if ptr.Deref(work.Spec.SuspendDispatching, false) {
		return c.suspend(ctx, work)
	}

	start := c.opts.Clock.Now()
	results := make([]manifestResult, len(work.Spec.Workload.Manifests))
	// Namespaces first, so a Namespace the Work lists is created by it
	// (and is its to delete) rather than auto-created for its contents.
	order := make([]int, 0, len(results))
	for _, namespaces := range []bool{true, false} {
		for i := range work.Spec.Workload.Manifests {
			if isNamespaceManifest(work.Spec.Workload.Manifests[i]) == namespaces {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		results[i] = c.apply(ctx, work, i)
		if m := c.opts.Metrics; m != nil {
			m.WorkApplies.WithLabelValues(results[i].outcome).Inc()
		}
	}
	if m := c.opts.Metrics; m != nil {
		m.WorkApplyDuration.Observe(c.opts.Clock.Since(start).Seconds())
	}
	c.reportRefusals(work, results)
	dropErr := c.removeDropped(ctx, work, results)
	if err := c.writeStatus(ctx, work, results); err != nil {
		return err
	}
	var failed []string
	for _, r := range results {
		// Conflicts wait for a member event or a Work change, refusals
		// for a Work change: retrying them would change nothing.
		if !r.ok() && r.outcome != OutcomeConflict && r.outcome != OutcomeRefused {
			failed = append(failed, describe(r))
		}
	}
	if dropErr != nil {
		failed = append(failed, dropErr.Error())
	}
	if len(failed) > 0 {
		return errRetry{failed: failed}
	}
	return nil
}

// isNamespaceManifest reports whether a manifest is a core Namespace.
func isNamespaceManifest(m workv1alpha1.Manifest) bool {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	return json.Unmarshal(m.Raw, &head) == nil && head.APIVersion == "v1" && head.Kind == "Namespace"
}

// waitForFinalizer says in the Work's Applied condition that nothing is
// applied until the hub has added the execution finalizer. The status is
// written only when it changes, and status writes do not requeue the Work.
func (c *Controller) waitForFinalizer(ctx context.Context, work *workv1alpha1.Work) error {
	status := work.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionUnknown,
		Reason: ReasonWaitingForFinalizer, Message: fmt.Sprintf("nothing is applied until the hub adds the %s finalizer", workv1alpha1.ExecutionFinalizer),
		ObservedGeneration: work.Generation, LastTransitionTime: metav1.NewTime(c.opts.Clock.Now())})
	_, err := c.putStatus(ctx, work, status)
	return err
}

// reportRefusals counts and announces (a Warning event on the Work) the
// refused manifests once per change of the Work or of its refusals, not on
// every sync.
func (c *Controller) reportRefusals(work *workv1alpha1.Work, results []manifestResult) {
	var refused []manifestResult
	for _, r := range results {
		if r.outcome == OutcomeRefused {
			refused = append(refused, r)
		}
	}
	if len(refused) == 0 {
		c.refusals.Delete(work.Name)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", work.UID, work.Generation)
	descriptions := make([]string, 0, len(refused))
	for _, r := range refused {
		fmt.Fprintf(&b, "/%d:%s", r.identifier.Ordinal, r.refusal)
		descriptions = append(descriptions, describe(r))
	}
	if last, ok := c.refusals.Load(work.Name); ok && last.(string) == b.String() {
		return
	}
	c.refusals.Store(work.Name, b.String())
	if m := c.opts.Metrics; m != nil {
		for _, r := range refused {
			m.ManifestsRefused.WithLabelValues(r.refusal).Inc()
		}
	}
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(work, "Warning", ReasonRefused,
			bounded(fmt.Sprintf("%d of %d manifests refused: %s", len(refused), len(results), strings.Join(descriptions, "; "))))
	}
}

// writeStatus reports the results, writing only when something changed.
func (c *Controller) writeStatus(ctx context.Context, work *workv1alpha1.Work, results []manifestResult) error {
	status := work.Status.DeepCopy()
	now := metav1.NewTime(c.opts.Clock.Now())
	status.ManifestStatuses = make([]workv1alpha1.ManifestStatus, 0, len(results))
	var failed, conflicts, refused, unhealthy []string
	for _, r := range results {
		ms := workv1alpha1.ManifestStatus{Identifier: r.identifier, Health: workv1alpha1.ResourceUnknown}
		if r.live != nil {
			ms.Status = c.opts.Interpreter.ReflectStatus(r.live)
		}
		if r.ok() {
			ms.ReadyEndpoints = c.endpoints.readyEndpoints(work.Name, r.live)
			ms.Health = c.opts.Interpreter.Health(r.live)
			if ms.Health != workv1alpha1.ResourceHealthy {
				unhealthy = append(unhealthy, describe(r))
			}
		} else if r.outcome == OutcomeConflict {
			conflicts = append(conflicts, describe(r))
		} else if r.outcome == OutcomeRefused {
			refused = append(refused, describe(r))
		} else {
			failed = append(failed, describe(r))
		}
		if len(status.ManifestStatuses) < statuslimits.MaxManifestStatuses { // the Work CRD admits no more
			status.ManifestStatuses = append(status.ManifestStatuses, ms)
		}
	}
	applied := metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
		Reason: ReasonAppliedSuccessful, Message: fmt.Sprintf("%d manifests applied", len(results)), ObservedGeneration: work.Generation, LastTransitionTime: now}
	switch {
	case len(refused) > 0:
		applied.Status, applied.Reason = metav1.ConditionFalse, ReasonRefused
		applied.Message = bounded(fmt.Sprintf("%d of %d manifests refused: %s", len(refused), len(results), strings.Join(append(refused, append(failed, conflicts...)...), "; ")))
	case len(failed) > 0:
		applied.Status, applied.Reason = metav1.ConditionFalse, ReasonAppliedFailed
		applied.Message = bounded(fmt.Sprintf("%d of %d manifests failed: %s", len(failed)+len(conflicts), len(results), strings.Join(append(failed, conflicts...), "; ")))
	case len(conflicts) > 0:
		applied.Status, applied.Reason = metav1.ConditionFalse, ReasonConflict
		applied.Message = bounded(fmt.Sprintf("%d of %d manifests conflict with existing objects: %s", len(conflicts), len(results), strings.Join(conflicts, "; ")))
	}
	available := metav1.Condition{Type: workv1alpha1.WorkConditionAvailable, Status: metav1.ConditionTrue,
		Reason: ReasonAvailable, Message: "every applied object is healthy", ObservedGeneration: work.Generation, LastTransitionTime: now}
	switch {
	case applied.Status != metav1.ConditionTrue:
		available.Status, available.Reason, available.Message = metav1.ConditionUnknown, ReasonNotApplied, "not every manifest is applied"
	case len(unhealthy) > 0:
		available.Status, available.Reason = metav1.ConditionFalse, ReasonNotAvailable
		available.Message = bounded("not healthy yet: " + strings.Join(unhealthy, "; "))
	}
	meta.SetStatusCondition(&status.Conditions, applied)
	meta.SetStatusCondition(&status.Conditions, available)
	if meta.FindStatusCondition(status.Conditions, workv1alpha1.WorkConditionDispatching) != nil {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionDispatching, Status: metav1.ConditionTrue,
			Reason: ReasonDispatching, Message: "dispatching resumed", ObservedGeneration: work.Generation, LastTransitionTime: now})
	}
	written, err := c.putStatus(ctx, work, status)
	if err != nil || !written || c.opts.Recorder == nil {
		return err
	}
	// Refusals have their own event (reportRefusals).
	if before := meta.FindStatusCondition(work.Status.Conditions, workv1alpha1.WorkConditionApplied); applied.Reason != ReasonRefused && (before == nil ||
		before.Status != applied.Status || before.Reason != applied.Reason) {
		eventType := "Normal"
		if applied.Status != metav1.ConditionTrue {
			eventType = "Warning"
		}
		c.opts.Recorder.Event(work, eventType, applied.Reason, applied.Message)
	}
	return nil
}

func (c *Controller) mayWrite(ctx context.Context) error {
	if c.opts.MayWrite == nil {
		return nil
	}
	return c.opts.MayWrite(ctx)
}

// putStatus writes status to the Work unless it is already there, and
// remembers the written Work so the next sync does not act on a stale copy.
func (c *Controller) putStatus(ctx context.Context, work *workv1alpha1.Work, status *workv1alpha1.WorkStatus) (bool, error) {
	if equality.Semantic.DeepEqual(*status, work.Status) {
		return false, nil
	}
	if err := c.mayWrite(ctx); err != nil {
		return false, err
	}
	updated := work.DeepCopy()
	updated.Status = *status
	result, err := c.hub.WorkV1alpha1().Works(c.opts.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err == nil {
		c.written.Store(work.Name, writtenWork{replaced: work.ResourceVersion, work: result})
		// The watch event of this write may have come before the Store.
		if cur, err := c.works.Works(c.opts.Namespace).Get(work.Name); err == nil {
			c.forgetWritten(cur)
		}
	}
	if m := c.opts.Metrics; m != nil {
		outcome := "success"
		if err != nil {
			outcome = "error"
		}
		m.WorkStatusWrites.WithLabelValues(outcome).Inc()
	}
	return err == nil, err
}

// suspend leaves a suspended Work's member objects as they are (no apply,
// no drift repair) and says so in the Work's Dispatching condition. Deletion
// is not suspended: release runs before this.
func (c *Controller) suspend(ctx context.Context, work *workv1alpha1.Work) error {
	status := work.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionDispatching, Status: metav1.ConditionFalse,
		Reason: ReasonSuspendDispatching, Message: "dispatching is suspended (policy suspension); member objects are left as they are",
		ObservedGeneration: work.Generation, LastTransitionTime: metav1.NewTime(c.opts.Clock.Now())})
	written, err := c.putStatus(ctx, work, status)
	if err != nil || !written {
		return err
	}
	klog.FromContext(ctx).Info("Work dispatching suspended", "work", klog.KObj(work))
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(work, "Normal", ReasonSuspendDispatching, "dispatching suspended; member objects are left as they are")
	}
	return nil
}

// release runs when a Work is being deleted: it deletes the member objects
// this Work created and releases (strips Flotilla's marks from) those it
// adopted, or releases all of them when the Work preserves them; then it
// removes the finalizer. Objects of refused manifests are not touched.
func (c *Controller) release(ctx context.Context, work *workv1alpha1.Work) error {
	if !slices.Contains(work.Finalizers, workv1alpha1.ExecutionFinalizer) {
		return nil
	}
	c.refusals.Delete(work.Name)
	skip := map[string]bool{}
	var current []ownedObject
	for i := range work.Spec.Workload.Manifests {
		desired, mapping, res := c.decode(work, i)
		if res.refusal != "" {
			skip[res.key()] = true
		}
		if res.err != nil {
			continue // never applied; applied earlier, the status or cache knows it
		}
		skip[res.key()] = true // read fresh below
		live, err := c.getLive(ctx, mapping.Resource, desired.GetNamespace(), desired.GetName())
		if err != nil {
			return err
		}
		if live != nil && workOf(live) == workKey(work) {
			current = append(current, ownedObject{gvr: mapping.Resource, obj: live})
		}
	}
	others, err := c.ownedBy(ctx, work, skip)
	if err != nil {
		return err
	}
	preserve := ptr.Deref(work.Spec.PreserveResourcesOnDeletion, false)
	for _, o := range append(current, others...) {
		if err := c.releaseOrDelete(ctx, work, o, preserve); err != nil {
			return err
		}
	}
	if err := c.mayWrite(ctx); err != nil {
		return err
	}
	updated := work.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
	_, err = c.hub.WorkV1alpha1().Works(c.opts.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// removeDropped deletes (if this Work created them) or releases the member
// objects that carry this Work's marks but are no longer among its
// manifests. It does nothing while a manifest cannot be decoded: an object
// whose manifest is unreadable must not look dropped.
func (c *Controller) removeDropped(ctx context.Context, work *workv1alpha1.Work, results []manifestResult) error {
	keep := map[string]bool{}
	// The same object can be served under two groups (v1 and
	// events.k8s.io Events): a kept manifest of that kind and name keeps it.
	keepAnyGroup := map[string]bool{}
	for _, r := range results {
		if !r.decoded {
			return nil
		}
		keep[r.key()] = true
		keepAnyGroup[identityKey("", r.identifier.Kind, r.identifier.Namespace, r.identifier.Name)] = true
	}
	dropped, err := c.ownedBy(ctx, work, keep)
	if err != nil {
		return err
	}
	preserve := ptr.Deref(work.Spec.PreserveResourcesOnDeletion, false)
	for _, o := range dropped {
		if keepAnyGroup[identityKey("", o.obj.GetKind(), o.obj.GetNamespace(), o.obj.GetName())] {
			continue
		}
		if err := c.releaseOrDelete(ctx, work, o, preserve); err != nil {
			return fmt.Errorf("dropped manifest %s %s: %w", o.obj.GetKind(), displayName(o.obj), err)
		}
	}
	return nil
}

// ownedBy finds the member objects that carry work's marks, except those
// whose identity is in skip: the ones its status reports (it knows the
// resources of earlier manifests, even when no watch runs for them since a
// restart) and the ones the managed-object caches hold.
func (c *Controller) ownedBy(ctx context.Context, work *workv1alpha1.Work, skip map[string]bool) ([]ownedObject, error) {
	key := workKey(work)
	seen := map[string]bool{}
	var out []ownedObject
	add := func(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
		if obj == nil || workOf(obj) != key {
			return
		}
		k := liveKey(obj)
		if skip[k] || seen[k] {
			return
		}
		seen[k] = true
		out = append(out, ownedObject{gvr: gvr, obj: obj})
	}
	for _, ms := range work.Status.ManifestStatuses {
		id := ms.Identifier
		if id.Resource == "" || id.Name == "" || skip[identityKey(id.Group, id.Kind, id.Namespace, id.Name)] {
			continue
		}
		// A kind the member no longer serves has no objects (and gets no
		// watch that could only fail).
		mapping, err := c.mapper.RESTMapping(schema.GroupKind{Group: id.Group, Kind: id.Kind}, id.Version)
		if err != nil || mapping.Resource.Resource != id.Resource {
			continue
		}
		obj, err := c.get(ctx, mapping.Resource, id.Namespace, id.Name)
		if err != nil {
			return nil, err
		}
		gvr := mapping.Resource
		if obj != nil {
			add(gvr, obj)
		}
	}
	for _, o := range c.objects.byWork(key) {
		add(o.gvr, o.obj)
	}
	return out, nil
}

// releaseOrDelete deletes a member object that Flotilla created (unless
// preserve) and otherwise strips Flotilla's marks from it. Both writes are
// preconditioned on the UID and resourceVersion that were read, so an object
// changed or re-created meanwhile is decided again, never hit blindly.
func (c *Controller) releaseOrDelete(ctx context.Context, work *workv1alpha1.Work, o ownedObject, preserve bool) error {
	logger := klog.FromContext(ctx).WithValues("work", klog.KObj(work), "resource", o.gvr.String(), "object", klog.KObj(o.obj))
	client := c.member.Resource(o.gvr).Namespace(o.obj.GetNamespace())
	if !preserve && createdByFlotilla(o.obj) {
		c.beforeWrite("delete", o.obj)
		err := client.Delete(ctx, o.obj.GetName(), metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
			Preconditions:     &metav1.Preconditions{UID: ptr.To(o.obj.GetUID()), ResourceVersion: ptr.To(o.obj.GetResourceVersion())},
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			logger.V(2).Info("Deleted member object Flotilla created")
		}
		return err
	}
	annotations := map[string]any{}
	for _, k := range markAnnotations {
		annotations[k] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": o.obj.GetUID(), "resourceVersion": o.obj.GetResourceVersion(),
		"labels": map[string]any{workv1alpha1.LabelManaged: nil}, "annotations": annotations}})
	if err != nil {
		return err
	}
	c.beforeWrite("release", o.obj)
	released, err := client.Patch(ctx, o.obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || isUIDMismatch(err) {
		return nil // gone, or another object now: not ours
	}
	if err == nil {
		c.objects.recordWrite(released)
		logger.V(2).Info("Released member object (Flotilla's marks removed)")
	}
	return err
}

// sweepOrphans deletes (or releases, if Flotilla did not create them)
// managed member objects whose Work is gone from the hub for longer than the
// grace period. The Work lister only loses a Work when the hub itself says it
// is gone (an unreachable hub leaves the cache as it was), and the grace
// period covers a hub restored from an old backup. Auto-created namespaces
// carry no Work's marks and are never swept.
func (c *Controller) sweepOrphans(ctx context.Context) {
	if !c.worksSync() {
		return
	}
	now := c.opts.Clock.Now()
	seen := map[string]bool{}
	for gvr, objs := range c.objects.all() {
		for _, obj := range objs {
			a := obj.GetAnnotations()
			if a[workv1alpha1.AnnotationWorkNamespace] != c.opts.Namespace {
				continue
			}
			if _, err := c.works.Works(c.opts.Namespace).Get(a[workv1alpha1.AnnotationWorkName]); err == nil || !apierrors.IsNotFound(err) {
				continue
			}
			key := gvr.String() + "/" + obj.GetNamespace() + "/" + obj.GetName()
			seen[key] = true
			c.orphanMu.Lock()
			since, ok := c.orphanSince[key]
			if !ok {
				c.orphanSince[key] = now
				since = now
			}
			c.orphanMu.Unlock()
			if now.Sub(since) < c.opts.OrphanGracePeriod {
				continue
			}
			gone := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: c.opts.Namespace, Name: a[workv1alpha1.AnnotationWorkName]}}
			if err := c.releaseOrDelete(ctx, gone, ownedObject{gvr: gvr, obj: obj}, false); err != nil {
				klog.FromContext(ctx).V(2).Info("Orphaned member object not swept yet", "resource", gvr.String(), "object", klog.KObj(obj), "err", err)
				continue
			}
			klog.FromContext(ctx).Info("Swept orphaned member object: its Work is gone from the hub",
				"resource", gvr.String(), "object", klog.KObj(obj), "work", a[workv1alpha1.AnnotationWorkName],
				"createdByFlotilla", createdByFlotilla(obj), "orphanedFor", now.Sub(since).Round(time.Second))
		}
	}
	c.orphanMu.Lock()
	for key := range c.orphanSince {
		if !seen[key] {
			delete(c.orphanSince, key)
		}
	}
	c.orphanMu.Unlock()
}

func describe(r manifestResult) string {
	id := r.identifier
	gv := id.Version
	if id.Group != "" {
		gv = id.Group + "/" + id.Version
	}
	name := id.Name
	if id.Namespace != "" {
		name = id.Namespace + "/" + id.Name
	}
	s := fmt.Sprintf("manifest %d (%s %s %s)", id.Ordinal, gv, id.Kind, name)
	if r.err != nil {
		s += ": " + r.err.Error()
	}
	return s
}

// bounded caps a condition message to what the Work CRD admits (and the
// hub reads), without control characters or invalid UTF-8.
func bounded(s string) string {
	return statuslimits.Text(s, statuslimits.MaxConditionMessage)
}
