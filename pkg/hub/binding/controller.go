// Package binding writes a binding's Works, one per target cluster as
// package render makes it (replicas revised to the cluster's share,
// override policies applied, failover state carried), in the cluster's
// namespace on the hub, where that cluster's agent pulls it; deletes the
// Works of clusters no longer targeted (but never the Work of a cluster
// that still has a graceful-eviction task); and sums the Works' status
// into the binding's status.
package binding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	policylisters "github.com/flotilla-io/flotilla/pkg/generated/listers/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/bindingstatus"
	"github.com/flotilla-io/flotilla/pkg/hub/cachetransform"
	"github.com/flotilla-io/flotilla/pkg/hub/forbidden"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/priorityqueue"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/render"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/rollout"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Event and condition reasons.
const (
	EventSyncWorkSucceed        = "SyncWorkSucceed"
	EventSyncWorkFailed         = "SyncWorkFailed"
	EventApplyOverrideFailed    = "ApplyOverridePolicyFailed"
	ReasonFullyApplied          = "FullyApplied"
	ReasonNotFullyApplied       = "NotFullyApplied"
	ReasonNoClusterScheduled    = "NoClusterScheduled"
	ReasonOverridePolicyInvalid = "OverridePolicyFailed"
	// ReasonOverrideChangedIdentity is both the Warning event and the
	// FullyApplied reason when a cluster's overrides would change the
	// object's apiVersion, kind, namespace or name: that cluster's Work is
	// neither written nor changed (an existing one is kept as it was).
	ReasonOverrideChangedIdentity = "OverrideChangedIdentity"
	// ReasonWorkConflict is both the Warning event and the FullyApplied
	// reason when the Work the binding maps to in a cluster's namespace
	// belongs to another binding (workobjects.OwnsWork): that Work is
	// neither written nor read for this binding.
	ReasonWorkConflict = "WorkConflict"
)

const workIndex = "byBindingUID"

// AggregatedStatusItem.AppliedMessage of a cluster's copy that is merely
// pending (every other message of an unapplied copy is an error).
const (
	MessageWorkNotCreated  = "Work not created yet"
	MessageWaitingForAgent = "waiting for the cluster's agent to apply the Work"
)

// Options tune the controller.
type Options struct {
	Clock    clock.Clock
	Metrics  *hubmetrics.Metrics
	Recorder record.EventRecorder
	// Statuses writes the binding status the controller shares with the
	// scheduler (a new binding's first status in one write); nil writes at
	// once.
	Statuses *bindingstatus.Writer
	// Interpreter revises a Work's replicas to its cluster's share,
	// customizations first; nil is the built-in interpreter.
	Interpreter *resourceinterpreter.Interpreter
	// Revisions keeps the templates' revisions and makes rollouts staged;
	// nil keeps none: every change goes to every cluster at once.
	Revisions *Revisions
	// Hold, when it returns a reason, keeps staged rollouts from starting
	// to update any cluster (the fleet guard sees fleet-wide disruption).
	Hold func() string
	// Analyzer runs the rollout groups' analyses; nil: every analysis is
	// inconclusive.
	Analyzer Analyzer
	// DependencyMinSuccessTime is the least soak of a dependency that
	// rolls in its workloads' groups (their health is reported only when
	// it changes, so a change needs time to show).
	DependencyMinSuccessTime time.Duration
}

// Controller is the binding controller.
type Controller struct {
	opts             Options
	client           flotillaclient.Interface
	bindings         *workobjects.Bindings
	templates        *workobjects.Templates
	works            cache.Indexer
	clusters         clusterlisters.ClusterLister
	overrides        policylisters.OverridePolicyLister
	clusterOverrides policylisters.ClusterOverridePolicyLister
	bindingIndexers  []cache.Indexer
	synced           []cache.InformerSynced
	queue            workqueue.TypedRateLimitingInterface[string]
	// created holds the keys of Works created and not yet in the cache: a
	// sync in between takes them as made (a second create would be a
	// conflict, one write more per Work).
	created sync.Map
	// workApplyClusters are the clusters with works_not_applied series
	// (only updateWorkApplyMetrics' goroutine touches it).
	workApplyClusters map[string]bool
}

// NewController wires the binding controller to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Statuses == nil {
		opts.Statuses = bindingstatus.NewWriter(client, factory, 0, opts.Clock)
	}
	work, policy := factory.Work().V1alpha1(), factory.Policy().V1alpha1()
	rb, crb := work.ResourceBindings(), work.ClusterResourceBindings()
	rt, crt := work.ResourceTemplates(), work.ClusterResourceTemplates()
	works, clusters := work.Works(), factory.Cluster().V1alpha1().Clusters()
	op, cop := policy.OverridePolicies(), policy.ClusterOverridePolicies()
	workobjects.AddOwnerTemplateIndex(rb.Informer(), crb.Informer())
	utilruntime.Must(works.Informer().AddIndexers(cache.Indexers{workIndex: func(obj any) ([]string, error) {
		if uid := obj.(metav1.Object).GetLabels()[workobjects.LabelBindingUID]; uid != "" {
			return []string{uid}, nil
		}
		return nil, nil
	}}))
	bindings := &workobjects.Bindings{Client: client, Namespaced: rb.Lister(), ClusterScoped: crb.Lister()}
	c := &Controller{opts: opts, client: client,
		bindings:         bindings,
		templates:        &workobjects.Templates{Client: client, Namespaced: rt.Lister(), ClusterScoped: crt.Lister()},
		works:            works.Informer().GetIndexer(),
		clusters:         clusters.Lister(),
		overrides:        op.Lister(),
		clusterOverrides: cop.Lister(),
		bindingIndexers:  []cache.Indexer{rb.Informer().GetIndexer(), crb.Informer().GetIndexer()},
		// Higher schedulePriority first, ties in arrival order: in a
		// failover, the Works of critical workloads are written first.
		queue: priorityqueue.NewRateLimitingQueue("binding", bindings.Priority),
	}
	c.synced = []cache.InformerSynced{rb.Informer().HasSynced, crb.Informer().HasSynced, rt.Informer().HasSynced,
		crt.Informer().HasSynced, works.Informer().HasSynced, clusters.Informer().HasSynced, op.Informer().HasSynced, cop.Informer().HasSynced}

	// A held status waits for the sync a binding's change is queued for
	// (bindingstatus.Writer.Changed): the scheduler's placement becomes
	// Works without an in-flight status first.
	enqueue := workobjects.EnqueueKey(func(key string) {
		c.opts.Statuses.Changed(key)
		c.queue.Add(key)
	})
	all := handler(enqueue)
	for _, inf := range []cache.SharedIndexInformer{rb.Informer(), crb.Informer()} {
		_, _ = inf.AddEventHandler(all)
		// A dependency that rolls in its dependents' groups is gated by
		// their health: their status brings it back.
		workobjects.AddRequiredByIndex(inf)
		_, _ = inf.AddEventHandler(handler(c.enqueueDependencies))
	}
	_, _ = works.Informer().AddEventHandler(handler(c.enqueueWorkBinding))
	forgetCreated := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if w, ok := obj.(*workv1alpha1.Work); ok {
			c.created.Delete(w.Namespace + "/" + w.Name)
		}
	}
	_, _ = works.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: forgetCreated, DeleteFunc: forgetCreated})
	templateChanged := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		c.enqueueOwned(workobjects.Key(obj.(metav1.Object)))
	}
	for _, inf := range []cache.SharedIndexInformer{rt.Informer(), crt.Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: templateChanged, DeleteFunc: templateChanged,
			UpdateFunc: func(o, n any) {
				oo, no := o.(metav1.Object), n.(metav1.Object)
				// A person steers a rollout with annotations.
				if oo.GetGeneration() != no.GetGeneration() ||
					oo.GetAnnotations()[workv1alpha1.AnnotationRolloutApprove] != no.GetAnnotations()[workv1alpha1.AnnotationRolloutApprove] ||
					oo.GetAnnotations()[workv1alpha1.AnnotationRolloutResume] != no.GetAnnotations()[workv1alpha1.AnnotationRolloutResume] {
					templateChanged(n)
				}
			}})
	}
	policyChanged := handler(func(any) { c.enqueueAll() })
	for _, inf := range []cache.SharedIndexInformer{op.Informer(), cop.Informer()} {
		_, _ = inf.AddEventHandler(policyChanged)
	}
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			// Override rules select clusters by name, labels and fields.
			oc, nc := o.(*clusterv1alpha1.Cluster), n.(*clusterv1alpha1.Cluster)
			// Rollouts count a cluster that is not Ready as lost.
			if !apiequality.Semantic.DeepEqual(oc.Labels, nc.Labels) || oc.Spec.Provider != nc.Spec.Provider ||
				oc.Spec.Region != nc.Spec.Region || !slices.Equal(oc.Spec.Zones, nc.Spec.Zones) ||
				meta.IsStatusConditionTrue(oc.Status.Conditions, clusterv1alpha1.ClusterConditionReady) !=
					meta.IsStatusConditionTrue(nc.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
				c.enqueueAll()
			}
		}})
	// A changed customization may revise replicas elsewhere
	// (replicaRevision): render every binding again (rare, admin-made).
	opts.Interpreter.OnChange(func(schema.GroupVersionKind) { c.enqueueAll() })
	c.synced = append(c.synced, opts.Interpreter.HasSynced)
	if opts.Revisions != nil {
		c.synced = append(c.synced, opts.Revisions.HasSynced)
		opts.Revisions.OnDelete(c.queue.Add)
	}
	return c
}

func handler(f func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, n any) { f(n) }, DeleteFunc: f}
}

func (c *Controller) enqueueWorkBinding(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	w, ok := obj.(*workv1alpha1.Work)
	if !ok || w.Labels[workobjects.LabelBindingUID] == "" {
		return
	}
	ns, name := w.Annotations[workobjects.AnnotationBindingNamespace], w.Annotations[workobjects.AnnotationBindingName]
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	// Counted before it is queued: the binding's held status waits for
	// this sync rather than say "waiting for the agent" about a report
	// that is in (bindingstatus.Writer.Changed).
	c.opts.Statuses.Changed(key)
	c.queue.Add(key)
}

func (c *Controller) enqueueOwned(templateKey string) {
	for _, indexer := range c.bindingIndexers {
		objs, _ := indexer.ByIndex(workobjects.OwnerTemplateIndex, templateKey)
		for _, o := range objs {
			c.queue.Add(workobjects.Key(o.(metav1.Object)))
		}
	}
}

func (c *Controller) enqueueAll() {
	for _, indexer := range c.bindingIndexers {
		for _, o := range indexer.List() {
			c.queue.Add(workobjects.Key(o.(metav1.Object)))
		}
	}
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("binding", ctx.Done(), c.synced...) {
		return
	}
	go wait.UntilWithContext(ctx, c.updateWorkApplyMetrics, 15*time.Second)
	queueworker.Run(ctx, "binding", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) (err error) {
	start := time.Now()
	// Every change of the binding and its Works counted so far is in the
	// cache this sync reads: once it is over, a held status no longer
	// waits for it (bindingstatus.Writer.Summed); one that failed does not
	// wait for the retry either.
	summing := c.opts.Statuses.Summing(key)
	defer func() {
		c.opts.Statuses.Summed(key, summing)
		if m := c.opts.Metrics; m != nil {
			result := "success"
			if err != nil {
				result = "error"
			}
			m.BindingSyncLatency.WithLabelValues(result).Observe(time.Since(start).Seconds())
		}
	}()
	binding, err := c.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if binding.DeletionTimestamp != nil {
		return c.finalize(ctx, binding)
	}
	binding = c.opts.Statuses.View(binding)
	ref := metav1.GetControllerOf(binding)
	if ref == nil {
		return nil
	}
	templateKey := ref.Name
	if binding.Namespace != "" {
		templateKey = binding.Namespace + "/" + ref.Name
	}
	tmpl, err := c.templates.Get(templateKey)
	if apierrors.IsNotFound(err) {
		return nil // the detector deletes the binding
	}
	if err != nil {
		return err
	}
	obj, err := workobjects.Object(tmpl)
	if err != nil {
		return nil // the detector reports it on the template
	}
	if !boundObject(binding.Spec.Resource, obj) {
		// The template now holds another object than the one the detector
		// bound (and checked): the detector re-binds it, or says on the
		// template why not. Until then the Works stay as they are.
		return nil
	}
	reads := c.workReads(binding)
	plan := c.planRollout(ctx, binding, tmpl.Annotations, obj, tmpl.Generation, reads)
	if plan != nil && plan.failed != nil {
		c.event(binding, "Warning", ReasonRevisionNotRecorded, plan.failed.Error())
		if werr := c.opts.Statuses.Write(ctx, binding, author, func(s *workv1alpha1.ResourceBindingStatus) {
			for _, cond := range rolloutFailedConditions(binding, plan.failed) {
				meta.SetStatusCondition(&s.Conditions, cond)
			}
		}, bindingstatus.Settled); werr != nil {
			klog.FromContext(ctx).Error(werr, "Writing the binding's rollout condition", "binding", workobjects.Key(binding))
		}
		return plan.failed
	}
	overrideErrs, wants, current, err := c.syncWorks(ctx, binding, obj, tmpl.Generation, plan, reads)
	if err != nil {
		if d, ok := forbidden.Parse(err); ok {
			return c.refused(ctx, binding, d, err)
		}
		if !apierrors.IsConflict(err) {
			c.event(binding, "Warning", EventSyncWorkFailed, err.Error())
		}
		return err
	}
	if err := c.deleteUntargetedWorks(ctx, binding); err != nil {
		if d, ok := forbidden.Parse(err); ok {
			return c.refused(ctx, binding, d, err)
		}
		return err
	}
	if err := c.updateStatus(ctx, binding, overrideErrs, wants, c.copies(binding, current), tmpl.Generation, plan, reads); err != nil {
		return err
	}
	c.requeueRollout(key, plan)
	return nil
}

// refused says on the binding that the apiserver refused the hub a write
// of its Works for want of a permission: a Warning event naming it and
// FullyApplied=False with reason PermissionDenied (the template mirrors
// it), instead of a binding that silently waits. It returns err: the sync
// is retried, as the role may be fixed any time.
func (c *Controller) refused(ctx context.Context, binding *workv1alpha1.ResourceBinding, d forbidden.Denial, err error) error {
	msg := d.Message("the binding's Works cannot be written")
	c.event(binding, "Warning", forbidden.EventReason, msg)
	cond := permissionDenied(binding, msg)
	if cur := meta.FindStatusCondition(binding.Status.Conditions, cond.Type); cur != nil && cur.Status == cond.Status &&
		cur.Reason == cond.Reason && cur.Message == cond.Message && cur.ObservedGeneration == cond.ObservedGeneration {
		return err
	}
	if werr := c.opts.Statuses.Write(ctx, binding, author, func(s *workv1alpha1.ResourceBindingStatus) {
		meta.SetStatusCondition(&s.Conditions, cond)
	}, bindingstatus.Settled); werr != nil {
		klog.FromContext(ctx).Error(werr, "Writing the binding's PermissionDenied condition", "binding", workobjects.Key(binding))
	}
	return err
}

// permissionDenied is the FullyApplied condition of a binding whose Works
// the hub may not write.
func permissionDenied(binding *workv1alpha1.ResourceBinding, msg string) metav1.Condition {
	return metav1.Condition{Type: workv1alpha1.BindingConditionFullyApplied, Status: metav1.ConditionFalse,
		Reason: forbidden.ReasonPermissionDenied, Message: msg, ObservedGeneration: binding.Generation}
}

// finalize deletes a deleted binding's Works, then lets it go. The Works'
// own finalizer holds each of them until its agent has removed the member
// objects; an unreachable cluster's Work waits for its agent without
// holding the binding.
func (c *Controller) finalize(ctx context.Context, binding *workv1alpha1.ResourceBinding) error {
	works, err := c.worksOf(binding)
	if err != nil {
		return err
	}
	for _, w := range works {
		if err := c.deleteWork(ctx, w); err != nil {
			return err
		}
	}
	if c.opts.Revisions != nil {
		if err := c.opts.Revisions.DeleteAll(ctx, binding); err != nil {
			return err
		}
	}
	if !slices.Contains(binding.Finalizers, workobjects.BindingFinalizer) {
		return nil
	}
	updated := binding.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == workobjects.BindingFinalizer })
	_, err = c.bindings.Update(ctx, updated)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Controller) worksOf(binding *workv1alpha1.ResourceBinding) ([]*workv1alpha1.Work, error) {
	objs, err := c.works.ByIndex(workIndex, string(binding.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*workv1alpha1.Work, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*workv1alpha1.Work))
	}
	return out, nil
}

func (c *Controller) deleteWork(ctx context.Context, w *workv1alpha1.Work) error {
	if w.DeletionTimestamp != nil {
		return nil
	}
	err := c.client.WorkV1alpha1().Works(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &w.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		c.count("delete")
		klog.FromContext(ctx).Info("Deleted Work", "work", w.Namespace+"/"+w.Name)
	}
	return err
}

func (c *Controller) count(op string) {
	if m := c.opts.Metrics; m != nil {
		m.WorkOperations.WithLabelValues(op).Inc()
	}
}

// syncWorks creates or updates the Work of every target cluster. An
// override that cannot be applied leaves that cluster's Work as it was
// and is reported per cluster (it is the user's to fix, not a retry).
// It also returns each cluster's wanted Work spec, against which the
// status of the stored Work is judged, and the clusters whose stored Work
// is now the one wanted (rendered from templateGeneration).
func (c *Controller) syncWorks(ctx context.Context, binding *workv1alpha1.ResourceBinding, obj *unstructured.Unstructured,
	templateGeneration int64, plan *rolloutPlan, reads *workReads) (map[string]error, map[string]*workv1alpha1.WorkSpec, map[string]bool, error) {
	overrideErrs := map[string]error{}
	wants := map[string]*workv1alpha1.WorkSpec{}
	current := map[string]bool{}
	clusterPolicies, policies, err := c.overridePolicies(binding.Namespace)
	if err != nil {
		return nil, nil, nil, err
	}
	holdNew := c.purgingDirectly(binding)
	var writes []workWrite
	for _, target := range render.Targets(binding) {
		cluster, err := c.clusters.Get(target.Name)
		if apierrors.IsNotFound(err) {
			continue // the scheduler moves the binding off a deleted cluster
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if cluster.DeletionTimestamp != nil {
			// Its teardown releases and deletes its Works; a Work written
			// (or a finalizer put back) now would hold the namespace forever.
			continue
		}
		stored := reads.get(cluster.Name)
		object, revision, generation := obj, int64(0), templateGeneration
		if plan != nil {
			if plan.hold[target.Name] {
				current[target.Name] = stored != nil
				continue
			}
			if object = plan.objects[target.Name]; object == nil {
				continue // its rollout group is not reached and nothing is stable yet
			}
			revision = plan.revs[target.Name]
			if g, ok := plan.generations[revision]; ok && revision != plan.decision.Status.Revision {
				generation = g
			}
		}
		want, _, err := render.Work(render.Input{Binding: binding, Object: object, TemplateGeneration: generation, Cluster: cluster,
			ClusterOverridePolicies: clusterPolicies, OverridePolicies: policies, Current: stored, Interpreter: c.opts.Interpreter, Revision: revision})
		if err != nil {
			overrideErrs[target.Name] = err
			reason := EventApplyOverrideFailed
			if identity := (*render.IdentityError)(nil); errors.As(err, &identity) {
				reason = ReasonOverrideChangedIdentity
			}
			c.event(binding, "Warning", reason, fmt.Sprintf("cluster %s: %v", target.Name, err))
			continue
		}
		wants[target.Name] = &want.Spec
		if holdNew && stored == nil {
			continue // created once the Directly-evicted copy is gone
		}
		writes = append(writes, workWrite{cluster: target.Name, want: want})
	}
	// Written in parallel (ensureWorks): one after the other, a binding
	// placed on 100 clusters waited 100 apiserver round trips.
	c.ensureWorks(ctx, binding, writes)
	for _, w := range writes {
		if conflict := (*workConflictError)(nil); errors.As(w.err, &conflict) {
			overrideErrs[w.cluster] = w.err
			c.event(binding, "Warning", ReasonWorkConflict, fmt.Sprintf("cluster %s: %v", w.cluster, w.err))
			continue
		}
		if w.err != nil {
			return nil, nil, nil, fmt.Errorf("work for cluster %s: %w", w.cluster, w.err)
		}
		current[w.cluster] = w.ok
	}
	return overrideErrs, wants, current, nil
}

func (c *Controller) overridePolicies(ns string) ([]*policyv1alpha1.ClusterOverridePolicy, []*policyv1alpha1.OverridePolicy, error) {
	clusterPolicies, err := c.clusterOverrides.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	var policies []*policyv1alpha1.OverridePolicy
	if ns != "" {
		if policies, err = c.overrides.OverridePolicies(ns).List(labels.Everything()); err != nil {
			return nil, nil, err
		}
	}
	return clusterPolicies, policies, nil
}

// workReads keeps, for the rest of one sync, the first cache read of each
// of a binding's Works: the rollout decision and the aggregated status are
// then made from the same agent reports. Read twice, a report that arrived
// in between gave a status whose rollout verdict was one sync behind its
// aggregated status (a cluster Healthy in one, still Updating in the
// other) and a second write to correct it.
type workReads struct {
	c       *Controller
	binding *workv1alpha1.ResourceBinding
	seen    map[string]*workv1alpha1.Work
}

func (c *Controller) workReads(binding *workv1alpha1.ResourceBinding) *workReads {
	return &workReads{c: c, binding: binding, seen: map[string]*workv1alpha1.Work{}}
}

// get is the cluster's Work as cached when first asked for in this sync,
// nil when there is none.
func (r *workReads) get(cluster string) *workv1alpha1.Work {
	if w, ok := r.seen[cluster]; ok {
		return w
	}
	var w *workv1alpha1.Work
	if obj, exists, _ := r.c.works.GetByKey(render.WorkKey(r.binding, cluster)); exists {
		w = obj.(*workv1alpha1.Work)
	}
	r.seen[cluster] = w
	return w
}

// ensureWork creates want or brings the stored Work to it, changing only
// what the hub owns (the agent owns the status and may add a finalizer).
// It reports whether the stored Work is now want. A stored Work of that
// name that another binding owns is left alone: a *workConflictError.
func (c *Controller) ensureWork(ctx context.Context, binding *workv1alpha1.ResourceBinding, want *workv1alpha1.Work) (bool, error) {
	obj, exists, err := c.works.GetByKey(want.Namespace + "/" + want.Name)
	if err != nil {
		return false, err
	}
	if !exists {
		key := want.Namespace + "/" + want.Name
		if spec, ok := c.created.Load(key); ok && sameSpec(spec.(workv1alpha1.WorkSpec), want.Spec) {
			return true, nil // made by us a moment ago; its event brings us back
		}
		// Recorded before the create: its Add event, which forgets it, can
		// come before Create returns.
		c.created.Store(key, want.Spec)
		if _, err := c.client.WorkV1alpha1().Works(want.Namespace).Create(ctx, want, metav1.CreateOptions{}); err != nil {
			c.created.Delete(key)
			if apierrors.IsAlreadyExists(err) {
				return false, nil // the cache is behind; the Work's event brings us back
			}
			return false, err
		}
		c.count("create")
		return true, nil
	}
	current := obj.(*workv1alpha1.Work)
	if !workobjects.OwnsWork(binding, current) {
		return false, &workConflictError{work: current}
	}
	if current.DeletionTimestamp != nil {
		// Still being removed from its cluster (e.g. the cluster left the
		// placement and came back); recreate it once it is gone.
		return false, nil
	}
	updated := current.DeepCopy()
	updated.Spec = want.Spec
	for k, v := range want.Labels {
		metav1.SetMetaDataLabel(&updated.ObjectMeta, k, v)
	}
	for k, v := range want.Annotations {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, k, v)
	}
	for _, k := range render.OptionalAnnotations() {
		if _, ok := want.Annotations[k]; !ok {
			delete(updated.Annotations, k)
		}
	}
	// The agent applies a Work only once it carries the execution finalizer,
	// and may only remove it: a Work made by an older hub gets it here.
	if !slices.Contains(updated.Finalizers, workv1alpha1.ExecutionFinalizer) {
		updated.Finalizers = append(updated.Finalizers, workv1alpha1.ExecutionFinalizer)
	}
	if sameSpec(updated.Spec, current.Spec) && apiequality.Semantic.DeepEqual(updated.ObjectMeta, current.ObjectMeta) {
		return true, nil
	}
	if _, err := c.client.WorkV1alpha1().Works(want.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return false, err
	}
	c.count("update")
	return true, nil
}

// sameSpec compares Work specs with the manifests compared as JSON values
// (the apiserver may store the same manifest with different bytes); a
// cached Work's manifests are digests (cachetransform.DigestManifests).
func sameSpec(a, b workv1alpha1.WorkSpec) bool {
	am, bm := a.Workload.Manifests, b.Workload.Manifests
	if len(am) != len(bm) {
		return false
	}
	for i := range am {
		if !cachetransform.SameManifest(am[i].Raw, bm[i].Raw) {
			return false
		}
	}
	a.Workload, b.Workload = workv1alpha1.WorkloadTemplate{}, workv1alpha1.WorkloadTemplate{}
	return apiequality.Semantic.DeepEqual(a, b)
}

// deleteUntargetedWorks deletes the Works of clusters the binding no longer
// targets, keeping those of clusters with a graceful-eviction task: the old
// copy serves until the new placement is healthy.
func (c *Controller) deleteUntargetedWorks(ctx context.Context, binding *workv1alpha1.ResourceBinding) error {
	works, err := c.worksOf(binding)
	if err != nil {
		return err
	}
	for _, w := range works {
		cluster := w.Annotations[workobjects.AnnotationCluster]
		if render.Targeted(binding, cluster) || evicting(binding, cluster) || required(binding, cluster) {
			continue
		}
		if err := c.deleteWork(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// required: a workload that depends on the object runs on the cluster (or
// is still being evicted from it), so its Work stays.
func required(binding *workv1alpha1.ResourceBinding, cluster string) bool {
	return slices.Contains(workobjects.RequiredClusters(&binding.Spec), cluster)
}

// evicting: the cluster's old copy is kept while a Gracefully or Never
// eviction task for it lasts. A Directly task's copy goes at once.
func evicting(binding *workv1alpha1.ResourceBinding, cluster string) bool {
	return slices.ContainsFunc(binding.Spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool {
		return t.FromCluster == cluster && policyv1alpha1.NormalizePurgeMode(t.PurgeMode) != policyv1alpha1.PurgeModeDirectly
	})
}

// purgingDirectly: some Directly-evicted cluster's old Work still exists
// and its agent can still remove it. New Works wait for it to be gone (the
// workload must not run twice).
func (c *Controller) purgingDirectly(binding *workv1alpha1.ResourceBinding) bool {
	for _, t := range binding.Spec.GracefulEvictionTasks {
		if policyv1alpha1.NormalizePurgeMode(t.PurgeMode) != policyv1alpha1.PurgeModeDirectly {
			continue
		}
		obj, exists, _ := c.works.GetByKey(render.WorkKey(binding, t.FromCluster))
		if !exists || !workobjects.OwnsWork(binding, obj.(*workv1alpha1.Work)) {
			continue
		}
		// An unreachable cluster's agent cannot confirm the removal; waiting
		// for it would leave the workload running nowhere.
		cluster, err := c.clusters.Get(t.FromCluster)
		if obj.(*workv1alpha1.Work).DeletionTimestamp != nil && (err != nil ||
			!meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)) {
			continue
		}
		return true
	}
	return false
}

// updateStatus sums the target clusters' Works into the binding's status.
func (c *Controller) updateStatus(ctx context.Context, binding *workv1alpha1.ResourceBinding, overrideErrs map[string]error,
	wants map[string]*workv1alpha1.WorkSpec, copies []workCopy, templateGeneration int64, plan *rolloutPlan, reads *workReads) error {
	now := metav1.NewTime(c.opts.Clock.Now())
	targets := render.Targets(binding)
	items := make([]workv1alpha1.AggregatedStatusItem, 0, len(targets))
	share := statuslimits.StatusShare(len(targets))
	for _, target := range targets {
		item := c.clusterStatus(binding, reads.get(target.Name), target.Name, overrideErrs[target.Name], wants[target.Name], share)
		if item.Health == workv1alpha1.ResourceUnhealthy {
			item.UnhealthySince = &now
			if prev := previousItem(binding, target.Name); prev != nil && prev.Health == workv1alpha1.ResourceUnhealthy && prev.UnhealthySince != nil {
				item.UnhealthySince = prev.UnhealthySince
			}
		}
		carryReportState(&item, previousItem(binding, target.Name), now)
		items = append(items, item)
	}
	updated := binding.Status.DeepCopy()
	updated.AggregatedStatus = items
	applied := fullyApplied(binding, items, overrideErrs)
	upToDate := worksUpToDate(binding, templateGeneration, copies)
	meta.SetStatusCondition(&updated.Conditions, applied)
	meta.SetStatusCondition(&updated.Conditions, upToDate)
	var rolloutStatus *workv1alpha1.RolloutStatus
	var rolloutConds []metav1.Condition
	if plan != nil {
		st := plan.decision.Status
		rolloutStatus = &st
		rolloutConds = rollout.Conditions(st, binding.Generation)
		updated.Rollout = rolloutStatus
		for _, cond := range rolloutConds {
			meta.SetStatusCondition(&updated.Conditions, cond)
		}
	}
	if apiequality.Semantic.DeepEqual(*updated, binding.Status) {
		return nil
	}
	err := c.opts.Statuses.Write(ctx, binding, author, func(s *workv1alpha1.ResourceBindingStatus) {
		s.AggregatedStatus = items
		meta.SetStatusCondition(&s.Conditions, applied)
		meta.SetStatusCondition(&s.Conditions, upToDate)
		if rolloutStatus != nil {
			s.Rollout = rolloutStatus
			for _, cond := range rolloutConds {
				meta.SetStatusCondition(&s.Conditions, cond)
			}
		}
	}, stage(binding, items, applied))
	if err == nil && plan != nil {
		// Said once the decision is recorded: a sync whose write failed
		// decides, and says it, again.
		for _, e := range plan.decision.Events {
			c.event(binding, e.Type, e.EventReason(), e.Message)
		}
	}
	return err
}

// author names the binding controller's part of a binding status.
const author = "binding"

// stage says how far a binding whose status is items and applied has come
// (bindingstatus): settled when fully applied or when a copy failed (an
// error to show at once); in the hub's hands while it has no cluster yet
// (the scheduler has not placed it) or some Work is not made; waiting for
// the agents when every Work is made and some agent has not reported the
// current one.
func stage(binding *workv1alpha1.ResourceBinding, items []workv1alpha1.AggregatedStatusItem, applied metav1.Condition) bindingstatus.Stage {
	if applied.Status == metav1.ConditionTrue {
		return bindingstatus.Settled
	}
	if len(items) == 0 {
		if meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled) == nil {
			return bindingstatus.HubStage
		}
		return bindingstatus.Settled
	}
	if applied.Reason != ReasonNotFullyApplied {
		return bindingstatus.Settled
	}
	out := bindingstatus.AgentStage
	for _, it := range items {
		switch {
		case it.Applied && it.ObservedGeneration == binding.Generation:
		case it.Applied, it.AppliedMessage == MessageWaitingForAgent:
		case it.AppliedMessage == MessageWorkNotCreated:
			out = bindingstatus.HubStage
		default:
			return bindingstatus.Settled
		}
	}
	return out
}

func previousItem(binding *workv1alpha1.ResourceBinding, cluster string) *workv1alpha1.AggregatedStatusItem {
	for i := range binding.Status.AggregatedStatus {
		if binding.Status.AggregatedStatus[i].ClusterName == cluster {
			return &binding.Status.AggregatedStatus[i]
		}
	}
	return nil
}

// clusterStatus judges one cluster's Work w (nil: none is cached). Its
// status counts for the current binding generation only when the stored
// Work is the one wanted now (the informer may not have seen our update
// yet) and the agent has applied its
// current generation: status from before a change says nothing about the
// new placement (the replacement's old 2/2 is not the new 3/3).
//
// What the agent wrote is untrusted: the message is cut to
// statuslimits.MaxClusterMessage characters and the status is left out
// when it is larger than share bytes (statuslimits.StatusShare), so no
// cluster's report can make the binding's status too large to write.
func (c *Controller) clusterStatus(binding *workv1alpha1.ResourceBinding, w *workv1alpha1.Work, cluster string, renderErr error, want *workv1alpha1.WorkSpec,
	share int) workv1alpha1.AggregatedStatusItem {
	item := workv1alpha1.AggregatedStatusItem{ClusterName: cluster, Health: workv1alpha1.ResourceUnknown}
	if conflict := (*workConflictError)(nil); errors.As(renderErr, &conflict) {
		item.AppliedMessage = statuslimits.Text(renderErr.Error(), statuslimits.MaxClusterMessage)
		return item
	}
	if renderErr != nil {
		item.AppliedMessage = statuslimits.Text("override policy failed: "+renderErr.Error(), statuslimits.MaxClusterMessage)
		return item
	}
	if w == nil {
		item.AppliedMessage = MessageWorkNotCreated
		return item
	}
	if !workobjects.OwnsWork(binding, w) {
		item.AppliedMessage = statuslimits.Text((&workConflictError{work: w}).Error(), statuslimits.MaxClusterMessage)
		return item
	}
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
	switch {
	case applied == nil:
		item.AppliedMessage = MessageWaitingForAgent
		return item
	case applied.Status != metav1.ConditionTrue:
		item.AppliedMessage = statuslimits.Text(applied.Message, statuslimits.MaxClusterMessage)
		if item.AppliedMessage == "" {
			item.AppliedMessage = "the agent reports the Work not applied"
		}
		return item
	}
	item.Applied = true
	if applied.ObservedGeneration == w.Generation && (want == nil || sameSpec(w.Spec, *want)) {
		item.ObservedGeneration = binding.Generation
	}
	if len(w.Status.ManifestStatuses) > 0 {
		ms := w.Status.ManifestStatuses[0]
		item.Status = statuslimits.Status(ms.Status, share)
		if note := statuslimits.StatusLeftOut(ms.Status, share); note != "" {
			item.AppliedMessage = note
		}
		// Ready endpoints are a Service's: a count reported for any other
		// kind is an agent's mistake or lie, and is dropped. A live count,
		// meaningful whatever generation it was reported for.
		if n := ms.ReadyEndpoints; n != nil && *n >= 0 && *n <= statuslimits.MaxReadyEndpoints && isService(binding.Spec.Resource) {
			item.ReadyEndpoints = ptr.To(*n)
		}
		if ms.Health != "" && item.ObservedGeneration == binding.Generation {
			item.Health = ms.Health
		}
	}
	return item
}

// isService says whether ref is a core Service.
func isService(ref workv1alpha1.ObjectReference) bool {
	return ref.APIVersion == "v1" && ref.Kind == "Service"
}

func fullyApplied(binding *workv1alpha1.ResourceBinding, items []workv1alpha1.AggregatedStatusItem, overrideErrs map[string]error) metav1.Condition {
	cond := metav1.Condition{Type: workv1alpha1.BindingConditionFullyApplied, ObservedGeneration: binding.Generation}
	if len(items) == 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonNoClusterScheduled, "the binding targets no cluster"
		return cond
	}
	var pending []string
	for _, it := range items {
		if !it.Applied || it.ObservedGeneration != binding.Generation {
			msg := it.AppliedMessage
			if msg == "" {
				msg = "the current Work is not applied yet"
			}
			pending = append(pending, it.ClusterName+": "+msg)
		}
	}
	if len(pending) == 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonFullyApplied, "applied on "+strconv.Itoa(len(items))+" cluster(s)"
		return cond
	}
	sort.Strings(pending)
	// Each cluster's part is bounded (clusterStatus); the whole is too,
	// however many clusters are pending.
	cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonNotFullyApplied,
		statuslimits.Join(pending, "; ", statuslimits.MaxSummary, "clusters")
	// A refused identity change or a Work of another binding is the
	// user's to fix, not a wait: say so in the reason.
	for _, err := range overrideErrs {
		if identity := (*render.IdentityError)(nil); errors.As(err, &identity) && cond.Reason != ReasonWorkConflict {
			cond.Reason = ReasonOverrideChangedIdentity
		}
		if conflict := (*workConflictError)(nil); errors.As(err, &conflict) {
			cond.Reason = ReasonWorkConflict
		}
	}
	return cond
}

func (c *Controller) event(binding *workv1alpha1.ResourceBinding, eventType, reason, msg string) {
	// A ClusterResourceBinding seen through workobjects carries its own
	// kind in TypeMeta, so the event lands on it.
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(binding, eventType, reason, msg)
	}
}

// enqueueDependencies syncs the dependencies that roll in the binding's
// groups.
func (c *Controller) enqueueDependencies(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	for _, indexer := range c.bindingIndexers {
		objs, _ := indexer.ByIndex(workobjects.RequiredByIndex, workobjects.Key(m))
		for _, o := range objs {
			c.queue.Add(workobjects.Key(o.(metav1.Object)))
		}
	}
}
