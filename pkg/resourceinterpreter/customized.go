/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package resourceinterpreter

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// Interpreter interprets objects with the ResourceInterpreterCustomizations
// it is fed (Watch, Set, Delete), falling back, operation by operation, to
// the built-in interpreter (the free functions of this package) and, for
// health, to the generic judgement from status conventions. The compiled
// rules are swapped atomically: readers never lock and see one consistent
// set. A nil *Interpreter is the built-in interpreter.
//
// Order for each operation: the customization's rule for the object's
// apiVersion and kind, else the built-in interpreter of its kind, else
// (health only) the generic judgement.
type Interpreter struct {
	rules atomic.Pointer[map[schema.GroupVersionKind]*customization.Rules]

	mu sync.Mutex
	// byName is every customization seen, compiled or not.
	byName    map[string]compiled
	listeners map[int]func(schema.GroupVersionKind)
	nextID    int
	// watched is Watch's handler registration: synced once every
	// customization the informer listed has been Set.
	watched cache.ResourceEventHandlerRegistration
}

type compiled struct {
	target schema.GroupVersionKind
	rules  *customization.Rules // nil: did not compile
}

// Default is the built-in interpreter (a nil *Interpreter).
var Default *Interpreter

// New returns an Interpreter without customizations.
func New() *Interpreter {
	i := &Interpreter{byName: map[string]compiled{}, listeners: map[int]func(schema.GroupVersionKind){}}
	empty := map[schema.GroupVersionKind]*customization.Rules{}
	i.rules.Store(&empty)
	return i
}

// OnChange registers f, called (outside any lock, from the informer's
// goroutine) with the target kind of every customization that is added,
// changed or deleted, so that a controller can re-interpret the objects of
// that kind without waiting for them to change. The returned func
// unregisters f (a controller that stops). A nil Interpreter never calls f.
func (i *Interpreter) OnChange(f func(schema.GroupVersionKind)) (remove func()) {
	if i == nil {
		return func() {}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	id := i.nextID
	i.nextID++
	i.listeners[id] = f
	return func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		delete(i.listeners, id)
	}
}

// snapshotListeners returns the listeners; called with mu held.
func (i *Interpreter) snapshotListeners() []func(schema.GroupVersionKind) {
	out := make([]func(schema.GroupVersionKind), 0, len(i.listeners))
	for _, f := range i.listeners {
		out = append(out, f)
	}
	return out
}

// Watch feeds i from a ResourceInterpreterCustomization informer.
func (i *Interpreter) Watch(informer cache.SharedIndexInformer) error {
	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ric, ok := obj.(*configv1alpha1.ResourceInterpreterCustomization); ok {
				i.Set(ric)
			}
		},
		UpdateFunc: func(_, obj any) {
			if ric, ok := obj.(*configv1alpha1.ResourceInterpreterCustomization); ok {
				i.Set(ric)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ric, ok := obj.(*configv1alpha1.ResourceInterpreterCustomization); ok {
				i.Delete(ric.Name)
			}
		},
	})
	if err == nil {
		i.mu.Lock()
		i.watched = registration
		i.mu.Unlock()
	}
	return err
}

// HasSynced reports whether the customizations the watched informer listed
// at its start are all in use (true for a nil Interpreter or one never
// watched). A controller that writes what an interpretation decides (the
// replicas of a Divided custom workload, its Works) waits for it, so a
// restart never reads such a workload without its customization.
func (i *Interpreter) HasSynced() bool {
	if i == nil {
		return true
	}
	i.mu.Lock()
	watched := i.watched
	i.mu.Unlock()
	return watched == nil || watched.HasSynced()
}

// Set compiles ric and uses it for its target kind. A customization that
// does not compile is ignored (logged): its kind falls back to the
// built-in or generic interpretation, or to another customization of the
// same kind.
func (i *Interpreter) Set(ric *configv1alpha1.ResourceInterpreterCustomization) {
	rules, errs := customization.Compile(ric)
	gv, _ := schema.ParseGroupVersion(ric.Spec.Target.APIVersion)
	c := compiled{target: gv.WithKind(ric.Spec.Target.Kind), rules: rules}
	if len(errs) > 0 {
		klog.InfoS("ResourceInterpreterCustomization does not compile; its kind uses the built-in interpretation",
			"customization", ric.Name, "target", c.target, "err", errs.ToAggregate())
	}
	i.mu.Lock()
	prev, had := i.byName[ric.Name]
	i.byName[ric.Name] = c
	i.rebuild()
	listeners := i.snapshotListeners()
	i.mu.Unlock()
	if had && prev.target != c.target {
		notify(listeners, prev.target)
	}
	notify(listeners, c.target)
}

// Delete forgets the customization named name.
func (i *Interpreter) Delete(name string) {
	i.mu.Lock()
	prev, had := i.byName[name]
	delete(i.byName, name)
	i.rebuild()
	listeners := i.snapshotListeners()
	i.mu.Unlock()
	if had {
		notify(listeners, prev.target)
	}
}

func notify(listeners []func(schema.GroupVersionKind), gvk schema.GroupVersionKind) {
	for _, f := range listeners {
		f(gvk)
	}
}

// rebuild swaps in the rules per kind: of several compiled customizations
// of one kind, the one whose name sorts first (a conflict is logged).
// Called with mu held.
func (i *Interpreter) rebuild() {
	names := make([]string, 0, len(i.byName))
	for name := range i.byName {
		names = append(names, name)
	}
	sort.Strings(names)
	next := map[schema.GroupVersionKind]*customization.Rules{}
	for _, name := range names {
		c := i.byName[name]
		if c.rules == nil {
			continue
		}
		if first, ok := next[c.target]; ok {
			klog.InfoS("Two ResourceInterpreterCustomizations target one kind; the first by name is used",
				"target", c.target, "used", first.Name, "ignored", name)
			continue
		}
		next[c.target] = c.rules
	}
	i.rules.Store(&next)
}

// Rules returns the compiled customization for gvk, nil when there is
// none (or i is nil).
func (i *Interpreter) Rules(gvk schema.GroupVersionKind) *customization.Rules {
	if i == nil {
		return nil
	}
	return (*i.rules.Load())[gvk]
}

// Kinds returns the kinds that have a compiled customization.
func (i *Interpreter) Kinds() []schema.GroupVersionKind {
	if i == nil {
		return nil
	}
	m := *i.rules.Load()
	out := make([]schema.GroupVersionKind, 0, len(m))
	for k := range maps.Keys(m) {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].String() < out[b].String() })
	return out
}

func (i *Interpreter) rulesFor(obj *unstructured.Unstructured) *customization.Rules {
	if i == nil || obj == nil {
		return nil
	}
	return i.Rules(obj.GroupVersionKind())
}

// Health judges obj: the customization's healthInterpretation, else the
// built-in interpreter, else the generic judgement. A rule that fails on
// obj (a missing field, the cost limit) is Unknown.
func (i *Interpreter) Health(obj *unstructured.Unstructured) workv1alpha1.ResourceHealth {
	if r := i.rulesFor(obj); r != nil && r.Health != nil {
		h, err := r.Health.EvalHealth(obj.Object)
		if err != nil {
			klog.V(4).InfoS("Health rule failed; health is Unknown", "customization", r.Name, "object", klog.KObj(obj), "err", err)
			return workv1alpha1.ResourceUnknown
		}
		return h
	}
	return Health(obj)
}

// ReflectStatus returns what of obj is reported to the hub: the
// customization's statusReflection (bounded like any reported status),
// else the built-in reflection. A rule that fails on obj falls back to
// the built-in reflection.
func (i *Interpreter) ReflectStatus(obj *unstructured.Unstructured) *runtime.RawExtension {
	if r := i.rulesFor(obj); r != nil && r.StatusReflection != nil {
		status, err := r.StatusReflection.EvalMap(obj.Object)
		if err == nil {
			return boundedStatus(status)
		}
		klog.V(4).InfoS("Status reflection rule failed; the built-in reflection is used", "customization", r.Name, "object", klog.KObj(obj), "err", err)
	}
	return ReflectStatus(obj)
}

// boundedStatus is status as JSON, less its largest fields if it exceeds
// the reported status limits; nil when empty.
func boundedStatus(status map[string]any) *runtime.RawExtension {
	if len(status) == 0 {
		return nil
	}
	raw, err := json.Marshal(status)
	if err == nil && (len(raw) > maxReflectedStatus || len(status) > statuslimits.MaxStatusProperties) {
		raw, err = json.Marshal(withoutLargest(status, maxReflectedStatus))
	}
	if err != nil || len(raw) > maxReflectedStatus || string(raw) == "{}" {
		return nil
	}
	return &runtime.RawExtension{Raw: raw}
}

// GetReplicas returns obj's replicas and one replica's requirements: the
// customization's replicaResource, else the built-in interpreter.
func (i *Interpreter) GetReplicas(obj *unstructured.Unstructured) (int32, *workv1alpha1.ReplicaRequirements, error) {
	r := i.rulesFor(obj)
	if r == nil || r.Replicas == nil {
		return GetReplicas(obj)
	}
	n, err := r.Replicas.EvalInt(obj.Object)
	if err != nil {
		return 0, nil, err
	}
	if r.PodTemplate == nil {
		return n, nil, nil
	}
	tmpl, err := r.PodTemplate.EvalPodTemplate(obj.Object)
	if err != nil {
		return 0, nil, err
	}
	requests, err := podRequests(&tmpl.Spec, "spec")
	if err != nil {
		return 0, nil, &customization.EvalError{Field: r.PodTemplate.Field, Err: err}
	}
	if len(requests) == 0 {
		return n, nil, nil
	}
	return n, &workv1alpha1.ReplicaRequirements{ResourceRequest: requests}, nil
}

// ReviseReplica writes replicas into obj (one cluster's copy): at the
// customization's replicaRevision.replicasPath, else as the built-in
// interpreter does. It implements render.ReplicaReviser.
func (i *Interpreter) ReviseReplica(obj *unstructured.Unstructured, replicas int32) error {
	r := i.rulesFor(obj)
	if r == nil || r.ReplicasPath == nil {
		return ReviseReplica(obj, replicas)
	}
	if err := r.ReplicasPath.Set(obj.Object, int64(replicas)); err != nil {
		return fmt.Errorf("%s: replicaRevision.replicasPath %s: %w", r.Name, r.ReplicasPath, err)
	}
	return nil
}

// GetDependencies returns what obj needs on the same clusters: the
// customization's dependencyInterpretation (replacing the built-in one),
// else the built-in interpreter. A dependency's namespace, if given, must
// be obj's own.
func (i *Interpreter) GetDependencies(obj *unstructured.Unstructured) ([]workv1alpha1.DependencyReference, error) {
	refs, err := i.references(obj)
	if err != nil {
		return nil, err
	}
	return SortDependencies(refs), nil
}

// references maps each dependency of obj to whether it is required: the
// customization's dependencyInterpretation, else the pod template's.
func (i *Interpreter) references(obj *unstructured.Unstructured) (map[workv1alpha1.DependencyReference]bool, error) {
	if r := i.rulesFor(obj); r != nil && r.Dependencies != nil {
		return customDependencies(r.Dependencies, obj)
	}
	return podReferences(obj)
}

// customDependencies evaluates a dependencyInterpretation rule into a map
// from each reference to whether it is required: an entry with optional:
// true (as podTemplateDependencies returns for a ConfigMap or Secret the
// pod template references only as optional) is optional unless another
// entry requires the same object.
func customDependencies(e *customization.Expression, obj *unstructured.Unstructured) (map[workv1alpha1.DependencyReference]bool, error) {
	list, err := e.EvalList(obj.Object)
	if err != nil {
		return nil, err
	}
	refs := map[workv1alpha1.DependencyReference]bool{}
	for n, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: [%d] is not a map", e.Field, n)
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		ref := workv1alpha1.DependencyReference{APIVersion: str("apiVersion"), Kind: str("kind"), Name: str("name")}
		if ref.APIVersion == "" || ref.Kind == "" || ref.Name == "" {
			return nil, fmt.Errorf("%s: [%d] needs apiVersion, kind and name as strings", e.Field, n)
		}
		if ns, ok := m["namespace"]; ok && ns != obj.GetNamespace() {
			return nil, fmt.Errorf("%s: [%d] is in namespace %v; a dependency must be in the object's own namespace %q",
				e.Field, n, ns, obj.GetNamespace())
		}
		optional := false
		if o, ok := m["optional"]; ok && o != nil {
			b, isBool := o.(bool)
			if !isBool {
				return nil, fmt.Errorf("%s: [%d] optional must be a bool, got %v", e.Field, n, o)
			}
			optional = b
		}
		refs[ref] = refs[ref] || !optional
	}
	return refs, nil
}

// OptionalDependencies returns the dependencies obj references only as
// optional: with a customization interpreting its dependencies, the
// entries its rule marks optional: true; else the built-in interpreter's.
func (i *Interpreter) OptionalDependencies(obj *unstructured.Unstructured) (map[workv1alpha1.DependencyReference]bool, error) {
	refs, err := i.references(obj)
	if err != nil {
		return nil, err
	}
	return optionalOnly(refs), nil
}

// RetainedFields returns the JSON pointers of obj's kind that the member
// owns (the customization's retention), nil when none.
func (i *Interpreter) RetainedFields(gvk schema.GroupVersionKind) []customization.Pointer {
	if r := i.Rules(gvk); r != nil {
		return r.Retention
	}
	return nil
}

// RetainFields copies into desired (the manifest about to be applied)
// the live member object's values of the fields the customization
// retains, so that applying desired leaves them as the member has them
// and they never count as drift. A field live lacks is left as desired
// has it. It reports whether it changed desired.
func (i *Interpreter) RetainFields(desired, live *unstructured.Unstructured) bool {
	if desired == nil || live == nil {
		return false
	}
	changed := false
	for _, p := range i.RetainedFields(desired.GroupVersionKind()) {
		v, ok := p.Get(live.Object)
		if !ok {
			continue
		}
		if err := p.Set(desired.Object, runtime.DeepCopyJSONValue(v)); err == nil {
			changed = true
		}
	}
	return changed
}

// The render package's ReplicaReviser (issue 33's contract).
var _ interface {
	ReviseReplica(obj *unstructured.Unstructured, replicas int32) error
} = (*Interpreter)(nil)
