// Package dependencies propagates what a workload depends on along with it
// (a policy's propagateDeps, Karmada's dependencies distributor). On the hub
// every object is a ResourceTemplate, so a dependency is the ResourceTemplate
// of the workload's namespace whose embedded object is the one referenced:
// the ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims of the
// pod template (resourceinterpreter.GetDependencies) and the template's
// spec.dependencies.
//
// For each binding with spec.propagateDeps the controller records the
// binding and its clusters (with the clusters it is still being evicted
// from) in each dependency's binding's spec.requiredBy; the binding
// controller renders the dependency there too. A dependency no policy
// selects gets a binding of its own with no placement, deleted when nothing
// requires it any more. A missing dependency is a DependenciesResolved=False
// condition on the dependent binding (mirrored on its template) and a
// Warning event; it resolves when the template appears.
//
// Only ResourceBindings are handled: a ClusterResourceBinding's object is
// cluster-scoped and has no pod template, and resolving its
// spec.dependencies would mean reaching into some namespace, which tenant
// isolation forbids.
package dependencies

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Event reasons.
const (
	// EventDependencyMissing (Warning, on the binding and its template):
	// a dependency has no ResourceTemplate the hub may propagate.
	EventDependencyMissing = "DependencyMissing"
	// EventDependenciesResolved (Normal): every dependency is propagated
	// again.
	EventDependenciesResolved = "DependenciesResolved"
)

const templateObjectIndex = "byEmbeddedObject"

// Options tune the controller.
type Options struct {
	Recorder record.EventRecorder
	// Scope tells namespaced kinds from cluster-scoped ones (the
	// detector's HostScope); nil knows none, so only namespaces are checked.
	Scope ScopeFunc
	// Interpreter lists a workload's dependencies, customizations first
	// (nil: the built-in interpreter).
	Interpreter *resourceinterpreter.Interpreter
}

// Controller keeps dependencies' spec.requiredBy in step with the
// bindings that need them.
type Controller struct {
	opts      Options
	client    flotillaclient.Interface
	bindings  worklisters.ResourceBindingLister
	required  cache.Indexer
	templates worklisters.ResourceTemplateLister
	objects   cache.Indexer
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the controller to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	work := factory.Work().V1alpha1()
	rb, rt := work.ResourceBindings(), work.ResourceTemplates()
	workobjects.AddRequiredByIndex(rb.Informer())
	utilruntime.Must(rt.Informer().AddIndexers(cache.Indexers{templateObjectIndex: embeddedObjectKey}))
	c := &Controller{opts: opts, client: client,
		bindings: rb.Lister(), required: rb.Informer().GetIndexer(),
		templates: rt.Lister(), objects: rt.Informer().GetIndexer(),
		synced: []cache.InformerSynced{rb.Informer().HasSynced, rt.Informer().HasSynced, opts.Interpreter.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dependencies"}),
	}
	_, _ = rb.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.bindingChanged(nil, obj) },
		UpdateFunc: func(o, n any) {
			c.bindingChanged(o, n)
		},
		DeleteFunc: func(obj any) { c.bindingChanged(nil, obj) },
	})
	_, _ = rt.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.templateChanged, DeleteFunc: c.templateChanged,
		UpdateFunc: func(o, n any) {
			if o.(metav1.Object).GetGeneration() != n.(metav1.Object).GetGeneration() ||
				o.(metav1.Object).GetDeletionTimestamp() != n.(metav1.Object).GetDeletionTimestamp() {
				c.templateChanged(n)
			}
		},
	})
	return c
}

// embeddedObjectKey indexes a template by the object it holds:
// "<template namespace>/<apiVersion>/<kind>/<name>".
func embeddedObjectKey(obj any) ([]string, error) {
	t, ok := obj.(*workv1alpha1.ResourceTemplate)
	if !ok {
		return nil, nil
	}
	id, err := workobjects.Identity(t)
	if err != nil {
		return nil, nil
	}
	return []string{objectKey(t.Namespace, id.APIVersion, id.Kind, id.Metadata.Name)}, nil
}

func objectKey(ns, apiVersion, kind, name string) string {
	return ns + "/" + apiVersion + "/" + kind + "/" + name
}

// bindingChanged enqueues a binding whose dependencies may have changed,
// and the bindings a dependency's binding lists (so a dependency binding
// that was deleted or edited is put right, and a dependent deleted while
// the hub was down is released).
func (c *Controller) bindingChanged(old, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	b, ok := obj.(*workv1alpha1.ResourceBinding)
	if !ok {
		return
	}
	o, _ := old.(*workv1alpha1.ResourceBinding)
	if o == nil || o.Generation != b.Generation || o.Spec.PropagateDeps != b.Spec.PropagateDeps || b.DeletionTimestamp != nil {
		if b.Spec.PropagateDeps || (o != nil && o.Spec.PropagateDeps) || old == nil {
			c.queue.Add(workobjects.Key(b))
		}
	}
	if o == nil || !apiequality.Semantic.DeepEqual(o.Spec.RequiredBy, b.Spec.RequiredBy) {
		keys, _ := workobjects.RequiredByKeys(b)
		for _, k := range keys {
			c.queue.Add(k)
		}
	}
}

// templateChanged re-resolves the bindings of the template's namespace that
// propagate dependencies: the template may be a dependency that appeared,
// changed what it holds, or went.
func (c *Controller) templateChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	t, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	list, _ := c.bindings.ResourceBindings(t.GetNamespace()).List(labels.Everything())
	for _, b := range list {
		if b.Spec.PropagateDeps {
			c.queue.Add(workobjects.Key(b))
		}
	}
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("dependencies", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "dependencies", c.queue, workers, c.sync)
}

// problemError is a dependency that cannot be propagated: reported in the
// condition, not retried.
type problemError struct{ msg string }

func (e *problemError) Error() string { return e.msg }

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || ns == "" {
		return nil // ClusterResourceBindings are not handled (see package doc)
	}
	binding, err := c.bindings.ResourceBindings(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) {
		binding = nil
	}
	wanted := map[string]bool{}
	var problems []string
	var tmpl *workv1alpha1.ResourceTemplate
	active := binding != nil && binding.DeletionTimestamp == nil && binding.Spec.PropagateDeps
	count := 0
	if active {
		var refs []workv1alpha1.DependencyReference
		tmpl, refs, err = c.dependenciesOf(binding)
		if err != nil {
			problems = append(problems, err.Error())
		}
		count = len(refs)
		optional := c.optionalOf(tmpl)
		snap := Snapshot(binding)
		for _, ref := range refs {
			candidates := c.candidates(ns, ref)
			if len(candidates) == 0 && optional[ref] {
				count-- // an optional reference to nothing: nothing to propagate, nothing missing
				continue
			}
			dep, obj, problem := Resolve(ns, ref, candidates, c.opts.Scope)
			if problem != "" {
				problems = append(problems, problem)
				continue
			}
			depName := workobjects.BindingName(obj.GetKind(), obj.GetName())
			if depName == binding.Name {
				continue
			}
			if err := c.require(ctx, ns, depName, dep, obj, snap); err != nil {
				if p := (*problemError)(nil); errors.As(err, &p) {
					problems = append(problems, p.msg)
					continue
				}
				return err
			}
			wanted[depName] = true
		}
	}
	// Release the dependencies no longer wanted.
	objs, err := c.required.ByIndex(workobjects.RequiredByIndex, key)
	if err != nil {
		return err
	}
	for _, o := range objs {
		dep := o.(*workv1alpha1.ResourceBinding)
		if !wanted[dep.Name] {
			if err := c.release(ctx, dep, ns, name); err != nil {
				return err
			}
		}
	}
	if binding == nil || binding.DeletionTimestamp != nil {
		return nil
	}
	return c.setCondition(ctx, binding, tmpl, active, count, problems)
}

// dependenciesOf reads the binding's template and what its object needs.
func (c *Controller) dependenciesOf(binding *workv1alpha1.ResourceBinding) (*workv1alpha1.ResourceTemplate, []workv1alpha1.DependencyReference, error) {
	ref := metav1.GetControllerOf(binding)
	if ref == nil || ref.Kind != "ResourceTemplate" {
		return nil, nil, nil
	}
	tmpl, err := c.templates.ResourceTemplates(binding.Namespace).Get(ref.Name)
	if err != nil {
		return nil, nil, nil // the detector deletes the binding
	}
	obj, err := workobjects.Object(tmpl)
	if err != nil {
		return tmpl, nil, nil // the detector reports it on the template
	}
	refs, err := Wanted(c.opts.Interpreter, obj, tmpl.Spec.Dependencies)
	if err != nil {
		return tmpl, nil, err
	}
	return tmpl, refs, nil
}

// optionalOf returns the optional-only references of tmpl's object.
func (c *Controller) optionalOf(tmpl *workv1alpha1.ResourceTemplate) map[workv1alpha1.DependencyReference]bool {
	if tmpl == nil {
		return nil
	}
	obj, err := workobjects.Object(tmpl)
	if err != nil {
		return nil
	}
	return Optional(c.opts.Interpreter, obj, tmpl.Spec.Dependencies)
}

func (c *Controller) candidates(ns string, ref workv1alpha1.DependencyReference) []*workv1alpha1.ResourceTemplate {
	objs, _ := c.objects.ByIndex(templateObjectIndex, objectKey(ns, ref.APIVersion, ref.Kind, ref.Name))
	out := make([]*workv1alpha1.ResourceTemplate, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*workv1alpha1.ResourceTemplate))
	}
	return out
}

// require records snap in the requiredBy of the dependency's binding,
// creating a placement-less binding for a dependency no policy selects.
func (c *Controller) require(ctx context.Context, ns, name string, tmpl *workv1alpha1.ResourceTemplate, obj *unstructured.Unstructured,
	snap workv1alpha1.BindingSnapshot) error {
	cur, err := c.bindings.ResourceBindings(ns).Get(name)
	if apierrors.IsNotFound(err) {
		rb := &workv1alpha1.ResourceBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels:          map[string]string{workv1alpha1.LabelDependencyOnly: "true"},
				Finalizers:      []string{workobjects.BindingFinalizer},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}},
			Spec: workv1alpha1.ResourceBindingSpec{
				Resource: workv1alpha1.ObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(),
					Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: tmpl.UID},
				RequiredBy: []workv1alpha1.BindingSnapshot{snap},
			},
		}
		if _, err := c.client.WorkV1alpha1().ResourceBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Created binding for a dependency no policy selects", "binding", ns+"/"+name, "requiredBy", snap.Name)
		return nil
	}
	if err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(cur); ref == nil || ref.UID != tmpl.UID {
		return &problemError{msg: fmt.Sprintf("%s %s: binding %s belongs to another template", obj.GetKind(), obj.GetName(), name)}
	}
	if cur.DeletionTimestamp != nil {
		// Released a moment ago and still being deleted: its Works go,
		// then it is made again.
		return fmt.Errorf("binding %s/%s of a dependency is being deleted; retrying", ns, name)
	}
	requiredBy, changed := WithRequirement(cur.Spec.RequiredBy, snap)
	if !changed {
		return nil
	}
	updated := cur.DeepCopy()
	updated.Spec.RequiredBy = requiredBy
	_, err = c.client.WorkV1alpha1().ResourceBindings(ns).Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// release removes binding ns/name from the dependency's requiredBy and
// deletes a dependency-only binding nothing requires any more.
func (c *Controller) release(ctx context.Context, dep *workv1alpha1.ResourceBinding, ns, name string) error {
	if dep.DeletionTimestamp != nil {
		return nil
	}
	requiredBy, changed := WithoutRequirement(dep.Spec.RequiredBy, ns, name)
	if !changed {
		return nil
	}
	updated := dep.DeepCopy()
	updated.Spec.RequiredBy = requiredBy
	if Orphaned(updated) {
		// The version precondition: a policy that selected the object
		// meanwhile (the detector gave it a placement) keeps it.
		rv := dep.ResourceVersion
		err := c.client.WorkV1alpha1().ResourceBindings(dep.Namespace).Delete(ctx, dep.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &dep.UID, ResourceVersion: &rv}})
		if err == nil {
			klog.FromContext(ctx).Info("Deleted the binding of a dependency nothing requires", "binding", dep.Namespace+"/"+dep.Name)
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	_, err := c.client.WorkV1alpha1().ResourceBindings(dep.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// setCondition writes DependenciesResolved on the binding (removes it when
// the binding no longer propagates dependencies) and warns when a
// dependency goes missing.
func (c *Controller) setCondition(ctx context.Context, binding *workv1alpha1.ResourceBinding, tmpl *workv1alpha1.ResourceTemplate,
	active bool, count int, problems []string) error {
	updated := binding.DeepCopy()
	prev := meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved)
	var cond metav1.Condition
	if active {
		cond = Condition(binding.Generation, count, problems)
		meta.SetStatusCondition(&updated.Status.Conditions, cond)
	} else {
		meta.RemoveStatusCondition(&updated.Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved)
	}
	if apiequality.Semantic.DeepEqual(updated.Status, binding.Status) {
		return nil
	}
	if _, err := (&workobjects.Bindings{Client: c.client}).PatchStatus(ctx, binding, updated); err != nil {
		return err
	}
	if !active || c.opts.Recorder == nil {
		return nil
	}
	record := func(eventType, reason, msg string) {
		c.opts.Recorder.Event(binding, eventType, reason, msg)
		if tmpl != nil {
			c.opts.Recorder.Event(tmpl, eventType, reason, msg)
		}
	}
	switch {
	case cond.Status == metav1.ConditionFalse && (prev == nil || prev.Status != cond.Status || prev.Message != cond.Message):
		record(corev1.EventTypeWarning, EventDependencyMissing, cond.Message)
	case cond.Status == metav1.ConditionTrue && prev != nil && prev.Status == metav1.ConditionFalse:
		record(corev1.EventTypeNormal, EventDependenciesResolved, cond.Message)
	}
	return nil
}
