// Package detector matches templates with propagation policies: for each
// ResourceTemplate and ClusterResourceTemplate it picks the policy that
// selects the embedded object, keeps the template's binding in step with
// that policy and the object, and mirrors the binding's status back onto
// the template, so the user sees where the object runs on the object they
// wrote.
package detector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	policylisters "github.com/flotilla-io/flotilla/pkg/generated/listers/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/forbidden"
	"github.com/flotilla-io/flotilla/pkg/priorityqueue"
	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Event reasons, Karmada's names (EventClaimReleased is Flotilla's).
const (
	EventApplyPolicySucceed   = "ApplyPolicySucceed"
	EventApplyPolicyFailed    = "ApplyPolicyFailed"
	EventPreemptPolicySucceed = "PreemptPolicySucceed"
	EventClaimReleased        = "ClaimReleased"
)

// Reasons of the template's Propagated condition.
const (
	ReasonPolicyMatched    = "PolicyMatched"
	ReasonNoMatchingPolicy = "NoMatchingPolicy"
	ReasonInvalidManifest  = "InvalidManifest"
	ReasonBindingConflict  = "BindingConflict"
	// ReasonInvalidQuantity: a quantity of the object (a pod template's
	// requests, limits, overhead, size limits, divisors) or of its
	// customization's replicaResource output is out of range or not a
	// quantity (quantities.Parse); the message names the field. The
	// existing binding is kept as it was.
	ReasonInvalidQuantity = "InvalidQuantity"
	// ReasonPermissionDenied: the apiserver refused the hub a write the
	// template's propagation needs (the binding, or its status) for want
	// of a permission; the message names it.
	ReasonPermissionDenied = forbidden.ReasonPermissionDenied
)

// Controller is the policy detector.
type Controller struct {
	client          flotillaclient.Interface
	templates       *workobjects.Templates
	bindings        *workobjects.Bindings
	bindingIndexers []cache.Indexer
	policies        policylisters.PropagationPolicyLister
	clusterPolicies policylisters.ClusterPropagationPolicyLister
	recorder        record.EventRecorder
	scope           ScopeFunc
	synced          []cache.InformerSynced
	queue           workqueue.TypedRateLimitingInterface[string]

	// overrides and clusterOverrides: a policy's dependentOverrides must
	// exist before it binds anything.
	overrides        policylisters.OverridePolicyLister
	clusterOverrides policylisters.ClusterOverridePolicyLister

	// statusHold and holds: an in-flight template status waits up to
	// statusHold for the binding to settle (statushold.go).
	clock      clock.Clock
	statusHold time.Duration
	holds      holds

	// denials: binding status writes the apiserver refused the hub
	// (bindingstatus); the binding cannot say so itself, its template does.
	denials *forbidden.Denials

	// preemptions counts preemptions (nil: not counted).
	preemptions *prometheus.CounterVec

	// interpreter reads replicas and aggregates status, customizations
	// first (nil: the built-in interpreter).
	interpreter *resourceinterpreter.Interpreter

	// priorityClasses resolve policies' schedulePriority (priority.go;
	// nil: not read, so a policy with one binds nothing).
	priorityClasses schedulinglisters.PriorityClassLister
}

// NewController wires the detector to factory's informers. scope (HostScope
// on the hub) tells whether a kind is namespaced; nil knows no kind, so only
// the namespace is checked.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, recorder record.EventRecorder, scope ScopeFunc) *Controller {
	if scope == nil {
		scope = func(schema.GroupVersionKind) (bool, bool) { return false, false }
	}
	work := factory.Work().V1alpha1()
	policy := factory.Policy().V1alpha1()
	rt, crt := work.ResourceTemplates(), work.ClusterResourceTemplates()
	rb, crb := work.ResourceBindings(), work.ClusterResourceBindings()
	pp, cpp := policy.PropagationPolicies(), policy.ClusterPropagationPolicies()
	workobjects.AddOwnerTemplateIndex(rb.Informer(), crb.Informer())
	c := &Controller{
		client:          client,
		templates:       &workobjects.Templates{Client: client, Namespaced: rt.Lister(), ClusterScoped: crt.Lister()},
		bindings:        &workobjects.Bindings{Client: client, Namespaced: rb.Lister(), ClusterScoped: crb.Lister()},
		bindingIndexers: []cache.Indexer{rb.Informer().GetIndexer(), crb.Informer().GetIndexer()},
		policies:        pp.Lister(),
		clusterPolicies: cpp.Lister(),
		recorder:        recorder,
		scope:           scope,
		clock:           clock.RealClock{},
		statusHold:      DefaultStatusHold,
	}
	// Work on bindings first, status mirrors after (workFirst): a new
	// template must not wait behind a fleet's held statuses coming due.
	c.queue = priorityqueue.NewRateLimitingQueue("detector", c.workFirst)
	enqueue := workobjects.EnqueueKey(c.queue.Add)
	for _, inf := range []cache.SharedIndexInformer{rt.Informer(), crt.Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
			UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue})
	}
	owner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if keys, _ := workobjects.OwnerTemplateKey(obj); len(keys) > 0 {
			c.queue.Add(keys[0])
		}
	}
	for _, inf := range []cache.SharedIndexInformer{rb.Informer(), crb.Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: owner,
			UpdateFunc: func(_, n any) { owner(n) }, DeleteFunc: owner})
	}
	policyChanged := func(obj any) { c.enqueuePolicyScope(obj) }
	for _, inf := range []cache.SharedIndexInformer{pp.Informer(), cpp.Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: policyChanged,
			UpdateFunc: func(_, n any) { policyChanged(n) }, DeleteFunc: policyChanged})
	}
	c.synced = []cache.InformerSynced{rt.Informer().HasSynced, crt.Informer().HasSynced, rb.Informer().HasSynced,
		crb.Informer().HasSynced, pp.Informer().HasSynced, cpp.Informer().HasSynced}
	c.watchOverridePolicies(policy)
	return c
}

// enqueuePolicyScope re-evaluates every template a policy could select: its
// namespace's for a PropagationPolicy, all of them for a cluster-wide one.
func (c *Controller) enqueuePolicyScope(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var ns string
	switch p := obj.(type) {
	case *policyv1alpha1.PropagationPolicy:
		ns = p.Namespace
	case *policyv1alpha1.ClusterPropagationPolicy:
	default:
		return
	}
	if ns != "" {
		list, _ := c.templates.Namespaced.ResourceTemplates(ns).List(labels.Everything())
		for _, t := range list {
			c.queue.Add(workobjects.Key(t))
		}
		return
	}
	list, _ := c.templates.Namespaced.List(labels.Everything())
	for _, t := range list {
		c.queue.Add(workobjects.Key(t))
	}
	clusterList, _ := c.templates.ClusterScoped.List(labels.Everything())
	for _, t := range clusterList {
		c.queue.Add(workobjects.Key(t))
	}
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("detector", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "detector", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	tmpl, err := c.templates.Get(key)
	if apierrors.IsNotFound(err) {
		c.holds.release(key)
		return c.deleteOwnedBindings(ctx, key, "", "")
	}
	if err != nil {
		return err
	}
	if tmpl.DeletionTimestamp != nil {
		c.holds.release(key)
		return c.deleteOwnedBindings(ctx, key, "", "")
	}
	obj, err := workobjects.Object(tmpl)
	if err != nil {
		return c.setPropagated(ctx, tmpl, nil, metav1.ConditionFalse, ReasonInvalidManifest, err.Error())
	}
	namespaced, known := c.scope(obj.GroupVersionKind())
	if problem := scopeProblem(tmpl.Namespace, obj, namespaced, known); problem != "" {
		// Nothing new is bound. A binding made before (e.g. before the
		// admission policy was installed) is neither changed nor deleted:
		// deleting it would delete the object on every member, which is
		// the owner's call; the binding controller renders only the object
		// its binding names, so the refused one never reaches a Work.
		binding := c.ownedBinding(key)
		msg := problem + "; not propagated"
		if binding != nil {
			msg += fmt.Sprintf("; the existing binding %s (%s %s) is kept as it was", binding.Name, binding.Spec.Resource.Kind, binding.Spec.Resource.Name)
		}
		return c.setPropagated(ctx, tmpl, binding, metav1.ConditionFalse, ReasonManifestScope, msg)
	}
	bindingName := workobjects.BindingName(obj.GetKind(), obj.GetName())
	// The claim is the binding's; a template not bound yet may carry the
	// one Karmada recorded on the object (hub wrap --from-karmada keeps
	// those labels, under Flotilla's keys), so a ported workload stays
	// with the policy that claimed it there.
	claim := objectClaim(obj)
	if existing, _ := c.bindings.Get(bindingKey(tmpl.Namespace, bindingName)); existing != nil {
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == tmpl.UID {
			claim = claimOf(existing.Labels)
		}
	}
	decision := DecideClaim(claim, c.candidates(tmpl.Namespace, obj))
	if decision.Winner == nil {
		binding, _ := c.bindings.Get(bindingKey(tmpl.Namespace, bindingName))
		msg := "no PropagationPolicy or ClusterPropagationPolicy selects this object"
		if binding != nil {
			msg += existingBindingNote(binding)
		}
		return c.setPropagated(ctx, tmpl, binding, metav1.ConditionFalse, ReasonNoMatchingPolicy, msg)
	}
	policy, policyLabels := decision.Winner.Spec, claimLabels(decision.Winner.PolicyRef)
	blocked := blockedCondition(tmpl, decision)
	if missing := c.missingOverrides(policy, tmpl.Namespace, policyLabels); len(missing) > 0 {
		binding, _ := c.bindings.Get(bindingKey(tmpl.Namespace, bindingName))
		return c.writeStatus(ctx, tmpl, binding, metav1.ConditionFalse, ReasonDependentOverridesMissing, dependentOverridesMessage(policyLabels, missing), blocked)
	}
	binding, updated, err := c.ensureBinding(ctx, tmpl, obj, bindingName, policy, policyLabels)
	if err != nil {
		if conflict := (*bindingConflictError)(nil); errors.As(err, &conflict) {
			return c.setPropagated(ctx, tmpl, nil, metav1.ConditionFalse, ReasonBindingConflict, err.Error())
		}
		if invalid := (*workloadAffinityLabelError)(nil); errors.As(err, &invalid) {
			// As an invalid quantity: said on the template, the binding kept.
			existing := c.ownedBinding(key)
			msg := err.Error() + "; not propagated"
			if existing != nil {
				msg += fmt.Sprintf("; the existing binding %s is kept as it was", existing.Name)
			}
			return c.writeStatus(ctx, tmpl, existing, metav1.ConditionFalse, ReasonInvalidWorkloadAffinityLabel, msg, blocked)
		}
		if missing := (*priorityClassError)(nil); errors.As(err, &missing) {
			// Karmada builds no binding then; the template and the policy
			// say why, and the PriorityClass informer brings the template
			// back when the class is created.
			existing := c.ownedBinding(key)
			msg := policyDescription(policyLabels) + ": " + err.Error() + "; not propagated"
			if existing != nil {
				msg += fmt.Sprintf("; the existing binding %s is kept as it was", existing.Name)
			}
			if propagatedChanged(tmpl.Status.Conditions, metav1.ConditionFalse, ReasonPriorityClassNotFound) && decision.Winner.Object != nil {
				c.recorder.Eventf(decision.Winner.Object, "Warning", ReasonPriorityClassNotFound, "does not propagate %s: %v", key, err)
			}
			return c.writeStatus(ctx, tmpl, existing, metav1.ConditionFalse, ReasonPriorityClassNotFound, msg, blocked)
		}
		if invalid := (*quantities.Error)(nil); errors.As(err, &invalid) {
			// Said on the template, not retried: only a change of the
			// template (or its customization) can fix it. Nothing is
			// written to the binding, so the copies running stay as they
			// are.
			existing := c.ownedBinding(key)
			msg := err.Error() + "; not propagated"
			if existing != nil {
				msg += fmt.Sprintf("; the existing binding %s is kept as it was", existing.Name)
			}
			return c.writeStatus(ctx, tmpl, existing, metav1.ConditionFalse, ReasonInvalidQuantity, msg, blocked)
		}
		if d, ok := forbidden.Parse(err); ok {
			// Said on the template (its status is still writable), and
			// retried: the role may be fixed any time.
			existing, _ := c.bindings.Get(bindingKey(tmpl.Namespace, bindingName))
			if serr := c.setPropagated(ctx, tmpl, existing, metav1.ConditionFalse, ReasonPermissionDenied,
				permissionDeniedMessage(policyLabels, d, "its binding "+bindingName+" cannot be written")); serr != nil {
				return serr
			}
			return err
		}
		c.recorder.Eventf(tmpl, "Warning", EventApplyPolicyFailed, "Failed to apply %s: %v", policyDescription(policyLabels), err)
		return err
	}
	if updated {
		c.claimChanged(ctx, tmpl, decision)
	}
	if err := c.deleteOwnedBindings(ctx, key, tmpl.UID, bindingName); err != nil {
		return err
	}
	if d, ok := c.denials.Get(workobjects.Key(binding)); ok {
		// The binding exists but its status cannot be written: without
		// this the template would keep its last status (often
		// NoMatchingPolicy, from before the policy) while the binding
		// waits for a status that never comes.
		return c.writeStatus(ctx, tmpl, binding, metav1.ConditionFalse, ReasonPermissionDenied,
			permissionDeniedMessage(policyLabels, d, "the status of its binding "+binding.Name+" cannot be written"), blocked)
	}
	return c.writeStatus(ctx, tmpl, binding, metav1.ConditionTrue, ReasonPolicyMatched, "propagated by "+policyDescription(policyLabels), blocked)
}

// permissionDeniedMessage is the Propagated condition's message when the
// hub may not make a write the propagation needs: which policy matched,
// what cannot be written and which permission is missing.
func permissionDeniedMessage(policyLabels map[string]string, d forbidden.Denial, what string) string {
	return "matched by " + policyDescription(policyLabels) + ", but " + what + ": " + d.Message("")
}

// ownedBinding returns a binding the template of key controls, if any.
func (c *Controller) ownedBinding(key string) *workv1alpha1.ResourceBinding {
	for _, indexer := range c.bindingIndexers {
		objs, _ := indexer.ByIndex(workobjects.OwnerTemplateIndex, key)
		for _, o := range objs {
			switch b := o.(type) {
			case *workv1alpha1.ResourceBinding:
				return b
			case *workv1alpha1.ClusterResourceBinding:
				return workobjects.FromClusterBinding(b)
			}
		}
	}
	return nil
}

func bindingKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// candidates are the policies that select obj (a template of namespace
// ns), with what DecideClaim needs to know of each. Policies being deleted
// select nothing: their claims are released.
func (c *Controller) candidates(ns string, obj *unstructured.Unstructured) []Candidate {
	var out []Candidate
	if ns != "" {
		list, _ := c.policies.PropagationPolicies(ns).List(labels.Everything())
		for _, p := range list {
			if cand, ok := candidateOf(p.Namespace, p.Name, p.UID, p.DeletionTimestamp != nil, &p.Spec, obj); ok {
				cand.Object = p
				out = append(out, cand)
			}
		}
	}
	list, _ := c.clusterPolicies.List(labels.Everything())
	for _, p := range list {
		if cand, ok := candidateOf("", p.Name, p.UID, p.DeletionTimestamp != nil, &p.Spec, obj); ok {
			cand.Object = p
			out = append(out, cand)
		}
	}
	return out
}

func candidateOf(ns, name string, uid types.UID, deleting bool, spec *policyv1alpha1.PropagationSpec, obj *unstructured.Unstructured) (Candidate, bool) {
	implicit := SelectorsPriority(spec.ResourceSelectors, obj, ns)
	if deleting || implicit == PriorityMisMatch {
		return Candidate{}, false
	}
	return Candidate{PolicyRef: PolicyRef{Namespace: ns, Name: name, UID: uid}, Priority: ptr.Deref(spec.Priority, 0),
		Implicit: implicit, Preemption: spec.Preemption, NamesObject: namesObject(spec.ResourceSelectors, obj, ns == ""), Spec: spec}, true
}

// claimBlock is a template's PreemptionBlocked condition and the policy
// it names.
type claimBlock struct {
	condition metav1.Condition
	policy    runtime.Object
}

// blockedCondition is the template's PreemptionBlocked condition for
// decision, or nil when no policy is kept from the template.
func blockedCondition(tmpl *workv1alpha1.ResourceTemplate, d ClaimDecision) *claimBlock {
	if d.Blocked == nil {
		return nil
	}
	return &claimBlock{policy: d.Blocked.Object, condition: metav1.Condition{Type: workobjects.TemplateConditionPreemptionBlocked,
		Status: metav1.ConditionTrue, Reason: d.BlockedReason, Message: d.BlockedMessage, ObservedGeneration: tmpl.Generation}}
}

// claimChanged says, once the binding has been written, that the template
// changed hands: by preemption (Karmada's PreemptPolicySucceed event), or
// because its claim was released. The binding's new placement moves the
// workload gracefully (the scheduler keeps the old clusters in graceful
// eviction tasks until the new placement is healthy).
func (c *Controller) claimChanged(ctx context.Context, tmpl *workv1alpha1.ResourceTemplate, d ClaimDecision) {
	switch {
	case d.Preempted != nil:
		if c.preemptions != nil {
			c.preemptions.WithLabelValues(kindOf(d.Winner.PolicyRef), kindOf(*d.Preempted)).Inc()
		}
		c.recorder.Eventf(tmpl, "Normal", EventPreemptPolicySucceed, "%s preempted %s", d.Winner.PolicyRef, *d.Preempted)
		klog.FromContext(ctx).Info("Policy preempted a template's claim", "template", workobjects.Key(tmpl),
			"policy", d.Winner.PolicyRef.String(), "preempted", d.Preempted.String())
	case d.Released != nil && !d.Released.is(d.Winner.PolicyRef):
		c.recorder.Eventf(tmpl, "Normal", EventClaimReleased, "%s no longer claims this object (%s); %s claims it now",
			*d.Released, c.releaseCause(*d.Released), d.Winner.PolicyRef)
	}
}

// releaseCause says why a recorded claim no longer holds.
func (c *Controller) releaseCause(r PolicyRef) string {
	var uid types.UID
	var deleting bool
	if r.Cluster() {
		p, err := c.clusterPolicies.Get(r.Name)
		if err != nil {
			return "deleted"
		}
		uid, deleting = p.UID, p.DeletionTimestamp != nil
	} else {
		p, err := c.policies.PropagationPolicies(r.Namespace).Get(r.Name)
		if err != nil {
			return "deleted"
		}
		uid, deleting = p.UID, p.DeletionTimestamp != nil
	}
	switch {
	case deleting:
		return "being deleted"
	case r.UID != "" && r.UID != uid:
		return "deleted and created again"
	default:
		return "it no longer selects the object"
	}
}

func kindOf(r PolicyRef) string {
	if r.Cluster() {
		return "ClusterPropagationPolicy"
	}
	return "PropagationPolicy"
}

func policyDescription(l map[string]string) string {
	if n, ok := l[workobjects.LabelClusterPropagationPolicyName]; ok {
		return "ClusterPropagationPolicy " + n
	}
	return fmt.Sprintf("PropagationPolicy %s/%s", l[workobjects.LabelPropagationPolicyNamespace], l[workobjects.LabelPropagationPolicyName])
}

type bindingConflictError struct{ msg string }

func (e *bindingConflictError) Error() string { return e.msg }

// ensureBinding creates or updates the template's binding from the policy
// and the object. It changes only the fields it owns, so the scheduler's
// spec.clusters and the eviction tasks survive.
func (c *Controller) ensureBinding(ctx context.Context, tmpl *workv1alpha1.ResourceTemplate, obj *unstructured.Unstructured,
	name string, policy *policyv1alpha1.PropagationSpec, policyLabels map[string]string) (*workv1alpha1.ResourceBinding, bool, error) {
	replicas, requirements, err := c.interpreter.GetReplicas(obj)
	if err != nil {
		return nil, false, err
	}
	groups, err := WorkloadAffinityGroups(tmpl.Namespace, obj, &policy.Placement)
	if err != nil {
		return nil, false, err
	}
	priority, err := c.schedulePriority(policy)
	if err != nil {
		return nil, false, err
	}
	placement := policy.Placement.DeepCopy()
	want := workv1alpha1.ResourceBindingSpec{
		Resource: workv1alpha1.ObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(),
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: tmpl.UID},
		Replicas:                    replicas,
		ReplicaRequirements:         requirements,
		Placement:                   placement,
		Failover:                    policy.Failover.DeepCopy(),
		ConflictResolution:          policy.ConflictResolution,
		ApplyStrategy:               policy.ApplyStrategy,
		RolloutStrategy:             policy.RolloutStrategy.DeepCopy(),
		PropagateDeps:               policy.PropagateDeps,
		Suspension:                  policy.Suspension.DeepCopy(),
		PreserveResourcesOnDeletion: policy.PreserveResourcesOnDeletion,
		SchedulePriority:            priority,
		WorkloadAffinityGroups:      groups,
	}
	current, err := c.bindings.Get(bindingKey(tmpl.Namespace, name))
	if apierrors.IsNotFound(err) {
		kind := "ResourceTemplate"
		if tmpl.Namespace == "" {
			kind = "ClusterResourceTemplate"
		}
		rb := &workv1alpha1.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tmpl.Namespace, Labels: workobjects.PolicyLabels(policyLabels),
				Finalizers:      []string{workobjects.BindingFinalizer},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind(kind))}},
			Spec: want,
		}
		// No Normal event: creating the binding is the routine step of
		// every template, and the template's Propagated condition says
		// which policy bound it. A binding changed by a policy or template
		// change still gets one.
		if err := c.bindings.Create(ctx, rb); err != nil {
			return nil, false, err
		}
		return rb, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if ref := metav1.GetControllerOf(current); ref == nil || ref.UID != tmpl.UID {
		return nil, false, &bindingConflictError{msg: fmt.Sprintf("binding %s already belongs to another template; two templates cannot hold the same %s %s",
			name, obj.GetKind(), obj.GetName())}
	}
	if current.DeletionTimestamp != nil {
		return current, false, nil
	}
	updated := current.DeepCopy()
	updated.Spec.Resource, updated.Spec.Replicas, updated.Spec.ReplicaRequirements = want.Resource, want.Replicas, want.ReplicaRequirements
	updated.Spec.Placement, updated.Spec.Failover, updated.Spec.ConflictResolution = want.Placement, want.Failover, want.ConflictResolution
	updated.Spec.Suspension, updated.Spec.PreserveResourcesOnDeletion = want.Suspension, want.PreserveResourcesOnDeletion
	updated.Spec.ApplyStrategy, updated.Spec.RolloutStrategy = want.ApplyStrategy, want.RolloutStrategy
	updated.Spec.PropagateDeps = want.PropagateDeps
	updated.Spec.SchedulePriority = want.SchedulePriority
	updated.Spec.WorkloadAffinityGroups = want.WorkloadAffinityGroups
	for _, k := range []string{workobjects.LabelPropagationPolicyNamespace, workobjects.LabelPropagationPolicyName, workobjects.LabelClusterPropagationPolicyName,
		workobjects.LabelPropagationPolicyPermanentID, workobjects.LabelClusterPropagationPolicyPermanentID} {
		delete(updated.Labels, k)
	}
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range workobjects.PolicyLabels(policyLabels) {
		updated.Labels[k] = v
	}
	// A requirement stored before the binding's CRD bounded quantities
	// is replaced without comparing it: Quantity.Cmp of "1e10000000"
	// computes 10^N.
	if boundedRequirements(current.Spec.ReplicaRequirements) && apiequality.Semantic.DeepEqual(updated.Spec, current.Spec) &&
		apiequality.Semantic.DeepEqual(withoutNewPermanentID(updated.Labels, current.Labels), current.Labels) {
		return current, false, nil
	}
	stored, err := c.bindings.Update(ctx, updated)
	if err != nil {
		return nil, false, err
	}
	c.recorder.Eventf(tmpl, "Normal", EventApplyPolicySucceed, "Applied %s: updated binding %s", policyDescription(policyLabels), name)
	return stored, true, nil
}

// boundedRequirements: every quantity of r is within quantities' range.
func boundedRequirements(r *workv1alpha1.ReplicaRequirements) bool {
	return r == nil || quantities.CheckList(r.ResourceRequest, "", true) == nil
}

// withoutNewPermanentID is want without the claim's permanent-id label
// when current has none: a binding written before Flotilla recorded the
// policy's UID keeps its claim by name, and an upgraded hub does not
// rewrite every binding just to add the UID (it is added with the
// binding's next change).
func withoutNewPermanentID(want, current map[string]string) map[string]string {
	out := maps.Clone(want)
	for _, k := range []string{workobjects.LabelPropagationPolicyPermanentID, workobjects.LabelClusterPropagationPolicyPermanentID} {
		if _, has := current[k]; !has {
			delete(out, k)
		}
	}
	return out
}

// deleteOwnedBindings deletes the bindings the template of key controls,
// except keep (the current one) when the template (uid) still exists.
func (c *Controller) deleteOwnedBindings(ctx context.Context, key string, uid any, keep string) error {
	for _, indexer := range c.bindingIndexers {
		objs, err := indexer.ByIndex(workobjects.OwnerTemplateIndex, key)
		if err != nil {
			return err
		}
		for _, o := range objs {
			m := o.(metav1.Object)
			if m.GetDeletionTimestamp() != nil || (m.GetName() == keep && metav1.GetControllerOf(m).UID == uid) {
				continue
			}
			var rb *workv1alpha1.ResourceBinding
			switch b := o.(type) {
			case *workv1alpha1.ResourceBinding:
				rb = b
			case *workv1alpha1.ClusterResourceBinding:
				rb = workobjects.FromClusterBinding(b)
			}
			if err := c.bindings.Delete(ctx, rb); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
			klog.FromContext(ctx).Info("Deleted binding of a template that no longer holds it", "template", key, "binding", m.GetName())
		}
	}
	return nil
}

// setPropagated writes the template's status: the Propagated condition and
// the binding's placement and status, mirrored. It writes only when what
// the user sees changes, and holds back a status mirrored from a binding in
// flight for up to statusHold (statushold.go), requeueing the template for
// when the hold ends: the binding's next steps usually replace it first.
func (c *Controller) setPropagated(ctx context.Context, tmpl *workv1alpha1.ResourceTemplate, binding *workv1alpha1.ResourceBinding,
	status metav1.ConditionStatus, reason, message string) error {
	return c.writeStatus(ctx, tmpl, binding, status, reason, message, nil)
}

// writeStatus is setPropagated with the PreemptionBlocked condition
// (removed when blocked is nil). A change of that condition is written at
// once, never held, and said once in an event on the template and on the
// policy kept from it: once per change, not once per resync.
func (c *Controller) writeStatus(ctx context.Context, tmpl *workv1alpha1.ResourceTemplate, binding *workv1alpha1.ResourceBinding,
	status metav1.ConditionStatus, reason, message string, blocked *claimBlock) error {
	key := workobjects.Key(tmpl)
	updated := tmpl.DeepCopy()
	updated.Status.ObservedGeneration = tmpl.Generation
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: workobjects.TemplateConditionPropagated,
		Status: status, Reason: reason, Message: message, ObservedGeneration: tmpl.Generation})
	shownBlock := meta.FindStatusCondition(tmpl.Status.Conditions, workobjects.TemplateConditionPreemptionBlocked)
	newlyBlocked := false
	if blocked != nil {
		meta.SetStatusCondition(&updated.Status.Conditions, blocked.condition)
		newlyBlocked = shownBlock == nil || shownBlock.Reason != blocked.condition.Reason || shownBlock.Message != blocked.condition.Message
	} else {
		meta.RemoveStatusCondition(&updated.Status.Conditions, workobjects.TemplateConditionPreemptionBlocked)
	}
	if binding != nil {
		MirrorBinding(c.interpreter, &updated.Status, binding, tmpl.Generation)
	}
	// A claim's state is shown at once: holding it back would hide for up
	// to a hold why a new policy did not take the template.
	held := mayHold(tmpl.Status.Conditions, status, binding) && !newlyBlocked && (blocked != nil) == (shownBlock != nil)
	if apiequality.Semantic.DeepEqual(updated.Status, tmpl.Status) {
		if !held {
			c.holds.release(key)
		}
		return nil
	}
	if held {
		// A binding that shows no status yet gets its first one when it
		// settles, or once its agents have been waited for
		// (bindingstatus); the steps until then are the hub's own and
		// follow by themselves, so wait for bindingstatus (holdFor).
		hold, hubStage := holdFor(c.statusHold, binding)
		if wait := c.holds.wait(key, c.clock.Now(), hold, hubStage); wait > 0 {
			c.queue.AddAfter(key, wait)
			return nil
		}
	}
	// A template waiting for its policy is not a failure (kubectl apply of a
	// file often creates the template a moment before the policy): the
	// condition says so, without a Warning.
	if status == metav1.ConditionFalse && reason != ReasonNoMatchingPolicy && propagatedChanged(tmpl.Status.Conditions, status, reason) {
		eventReason := EventApplyPolicyFailed
		if reason == ReasonPermissionDenied {
			eventReason = forbidden.EventReason
		}
		c.recorder.Event(tmpl, "Warning", eventReason, message)
	}
	// A failed write keeps the hold as it is: the retry writes at once if
	// the hold is over.
	if err := c.templates.UpdateStatus(ctx, updated); err != nil {
		if d, ok := forbidden.Parse(err); ok {
			c.recorder.Event(tmpl, "Warning", forbidden.EventReason, d.Message("the template's status cannot be written"))
		}
		return err
	}
	if held {
		c.holds.written(key, c.clock.Now(), c.statusHold)
	} else {
		c.holds.release(key)
	}
	if newlyBlocked {
		c.recorder.Event(tmpl, "Warning", blocked.condition.Reason, blocked.condition.Message)
		if blocked.policy != nil {
			kind := "ResourceTemplate"
			if tmpl.Namespace == "" {
				kind = "ClusterResourceTemplate"
			}
			c.recorder.Eventf(blocked.policy, "Warning", blocked.condition.Reason, "does not take %s %s: %s", kind, key, blocked.condition.Message)
		}
	}
	return nil
}

// mayHold says whether a template status may wait (statushold.go): only a
// Propagated=True status mirrored from a binding in flight, and only while
// the template does not show Propagated=False. A False one shown (no
// policy matched, a write was refused) is no longer true once a policy
// propagates the template, and must not stay for a hold: a template
// applied a moment before its policy kept saying NoMatchingPolicy for as
// long as its binding was in flight (up to 8 holds when the binding's
// status could not be written).
func mayHold(shown []metav1.Condition, status metav1.ConditionStatus, binding *workv1alpha1.ResourceBinding) bool {
	if status != metav1.ConditionTrue || !inFlight(binding) {
		return false
	}
	c := meta.FindStatusCondition(shown, workobjects.TemplateConditionPropagated)
	return c == nil || c.Status != metav1.ConditionFalse
}

// propagatedChanged: the Propagated condition is absent or says something
// else (status or reason) than status and reason.
func propagatedChanged(conds []metav1.Condition, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(conds, workobjects.TemplateConditionPropagated)
	return c == nil || c.Status != status || c.Reason != reason
}

// MirrorBinding copies where the object runs and how it is doing from the
// binding to the template's status.
func MirrorBinding(interpreter *resourceinterpreter.Interpreter, status *workv1alpha1.ResourceTemplateStatus, binding *workv1alpha1.ResourceBinding, generation int64) {
	status.Clusters = binding.Spec.Clusters
	status.AggregatedStatus = binding.Status.AggregatedStatus
	status.Rollout = binding.Status.Rollout
	for _, t := range []string{workv1alpha1.BindingConditionScheduled, workv1alpha1.BindingConditionFullyApplied, workv1alpha1.BindingConditionWorksUpToDate,
		workv1alpha1.BindingConditionDependenciesResolved, workv1alpha1.BindingConditionRolloutProgressing,
		workv1alpha1.BindingConditionRolloutHalted, workv1alpha1.BindingConditionRolloutComplete} {
		if cond := meta.FindStatusCondition(binding.Status.Conditions, t); cond != nil {
			mirrored := *cond
			mirrored.ObservedGeneration = generation
			meta.SetStatusCondition(&status.Conditions, mirrored)
		}
	}
	mirrorWorkloadStatus(interpreter, status, binding, generation)
}

// WithBindingStatusDenials shows a binding status write the apiserver
// refused (recorded in d by bindingstatus) on the binding's template, as
// Propagated=False with reason PermissionDenied, until a write succeeds.
func (c *Controller) WithBindingStatusDenials(d *forbidden.Denials) *Controller {
	c.denials = d
	d.OnChange(func(key string) {
		binding, err := c.bindings.Get(key)
		if err != nil {
			return
		}
		if keys, _ := workobjects.OwnerTemplateKey(binding); len(keys) > 0 {
			c.queue.Add(keys[0])
		}
	})
	return c
}

// WithPreemptionMetric counts preemptions on m, by the kinds of the
// preempting and the preempted policy.
func (c *Controller) WithPreemptionMetric(m *prometheus.CounterVec) *Controller {
	c.preemptions = m
	return c
}

// WithInterpreter makes the detector read replicas and aggregate status
// with interpreter (customizations first), and re-read every template
// when a customization changes.
func (c *Controller) WithInterpreter(interpreter *resourceinterpreter.Interpreter) *Controller {
	c.interpreter = interpreter
	c.synced = append(c.synced, interpreter.HasSynced)
	interpreter.OnChange(func(schema.GroupVersionKind) { c.enqueuePolicyScope(&policyv1alpha1.ClusterPropagationPolicy{}) })
	return c
}

// WithStatusHold sets how long an in-flight template status may be held
// back (DefaultStatusHold unless set; 0 writes every change at once).
func (c *Controller) WithStatusHold(d time.Duration) *Controller {
	c.statusHold = d
	return c
}
