// Package workobjects lets the hub's propagation controllers treat the
// namespaced and cluster-scoped kinds of templates and bindings alike:
// ClusterResourceTemplate and ClusterResourceBinding share their spec and
// status types with ResourceTemplate and ResourceBinding, so each is handled
// as its namespaced twin with an empty namespace, and converted back at the
// client. Keys are cache.MetaNamespaceKeyFunc keys: "namespace/name" for the
// namespaced kind, "name" for the cluster-scoped one.
package workobjects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
)

// Labels and annotations of the propagation path.
const (
	// LabelBindingUID on a Work names the UID of the binding it renders;
	// the hub indexes Works by it.
	LabelBindingUID = "work.flotilla.io/binding-uid"
	// AnnotationBindingNamespace and AnnotationBindingName on a Work name
	// its binding (namespace empty for a ClusterResourceBinding).
	AnnotationBindingNamespace = "work.flotilla.io/binding-namespace"
	AnnotationBindingName      = "work.flotilla.io/binding-name"
	// AnnotationCluster on a Work names the cluster it is for.
	AnnotationCluster = "work.flotilla.io/cluster"

	// LabelPropagationPolicyNamespace / Name and
	// LabelClusterPropagationPolicyName on a binding name the policy that
	// selected its template (a name longer than a label value may be is
	// shortened: PolicyLabelValue).
	LabelPropagationPolicyNamespace   = "propagationpolicy.flotilla.io/namespace"
	LabelPropagationPolicyName        = "propagationpolicy.flotilla.io/name"
	LabelClusterPropagationPolicyName = "clusterpropagationpolicy.flotilla.io/name"
	// LabelPropagationPolicyPermanentID and
	// LabelClusterPropagationPolicyPermanentID on a binding hold the UID
	// of that policy (Karmada's label names): the claim is the policy's,
	// not its name's, so a policy deleted and created again under the same
	// name has lost it.
	LabelPropagationPolicyPermanentID        = "propagationpolicy.flotilla.io/permanent-id"
	LabelClusterPropagationPolicyPermanentID = "clusterpropagationpolicy.flotilla.io/permanent-id"

	// BindingFinalizer holds a binding until its Works are being deleted.
	BindingFinalizer = "flotilla.io/binding-controller"

	// TemplateConditionPropagated says whether a policy selects the template.
	TemplateConditionPropagated = "Propagated"
	// TemplateConditionPreemptionBlocked, present only while true, says
	// that a policy which would win the template were it unclaimed may not
	// take it from the policy that claimed it.
	TemplateConditionPreemptionBlocked = "PreemptionBlocked"
	// TemplateConditionWorkloadStatusIncomplete, present only while true,
	// says that status.workloadStatus leaves out some cluster's reported
	// status, or is not the aggregate at all (too large, or the rule
	// failed), and why.
	TemplateConditionWorkloadStatusIncomplete = "WorkloadStatusIncomplete"
)

// BindingName is the binding of a template's object: "<name>-<kind>".
func BindingName(kind, name string) string {
	return strings.ToLower(name + "-" + kind)
}

// WorkName names a binding's Work in a cluster namespace: the binding's name
// (cut to stay a valid name) and a short hash of its namespace and name, as
// bindings of several namespaces share one cluster namespace.
func WorkName(bindingNamespace, bindingName string) string {
	sum := sha256.Sum256([]byte(bindingNamespace + "/" + bindingName))
	name := bindingName
	if len(name) > 200 {
		name = strings.TrimRight(name[:200], "-.")
	}
	return name + "-" + hex.EncodeToString(sum[:])[:10]
}

// PolicyLabelValue is a policy's name as a label value: the name itself
// when it fits (at most 63 characters), else its first 52 characters, a
// dash and 10 hex digits of its hash. A policy name may have up to 253
// characters and a label value only 63; Karmada's e2e suite propagates with
// a policy name longer than 63.
func PolicyLabelValue(name string) string {
	if len(name) <= validation.LabelValueMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:52], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}

// PolicyLabels is labels with every value made a valid label value by
// PolicyLabelValue.
func PolicyLabels(policyLabels map[string]string) map[string]string {
	out := make(map[string]string, len(policyLabels))
	for k, v := range policyLabels {
		out[k] = PolicyLabelValue(v)
	}
	return out
}

// Key is the queue key of a template or binding.
func Key(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// Object returns the template's embedded object, defaulting its namespace
// to the template's. A manifest that does not parse is a clear error.
func Object(t *workv1alpha1.ResourceTemplate) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if len(t.Spec.Manifest.Raw) == 0 {
		return nil, fmt.Errorf("spec.manifest is empty")
	}
	if err := obj.UnmarshalJSON(t.Spec.Manifest.Raw); err != nil {
		return nil, fmt.Errorf("spec.manifest is not a Kubernetes object: %w", err)
	}
	if t.Namespace != "" && obj.GetNamespace() == "" {
		obj.SetNamespace(t.Namespace)
	}
	return obj, nil
}

// ObjectIdentity is what names a template's embedded object.
type ObjectIdentity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

// Identity returns the identity of the template's embedded object, its
// namespace defaulted as Object does, without decoding the rest of it
// (an index function runs it on every event of every template).
func Identity(t *workv1alpha1.ResourceTemplate) (ObjectIdentity, error) {
	var id ObjectIdentity
	if len(t.Spec.Manifest.Raw) == 0 {
		return id, fmt.Errorf("spec.manifest is empty")
	}
	// Case-sensitive, as the apiserver and unstructured decode.
	if err := utiljson.Unmarshal(t.Spec.Manifest.Raw, &id); err != nil {
		return id, fmt.Errorf("spec.manifest is not a Kubernetes object: %w", err)
	}
	if id.Kind == "" {
		return id, fmt.Errorf("spec.manifest is not a Kubernetes object: it has no kind")
	}
	if t.Namespace != "" && id.Metadata.Namespace == "" {
		id.Metadata.Namespace = t.Namespace
	}
	return id, nil
}

// FromClusterTemplate views a ClusterResourceTemplate as a ResourceTemplate
// without namespace.
func FromClusterTemplate(c *workv1alpha1.ClusterResourceTemplate) *workv1alpha1.ResourceTemplate {
	return &workv1alpha1.ResourceTemplate{TypeMeta: metav1.TypeMeta{APIVersion: workv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterResourceTemplate"},
		ObjectMeta: c.ObjectMeta, Spec: c.Spec, Status: c.Status}
}

// FromClusterBinding views a ClusterResourceBinding as a ResourceBinding
// without namespace.
func FromClusterBinding(c *workv1alpha1.ClusterResourceBinding) *workv1alpha1.ResourceBinding {
	return &workv1alpha1.ResourceBinding{TypeMeta: metav1.TypeMeta{APIVersion: workv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterResourceBinding"},
		ObjectMeta: c.ObjectMeta, Spec: c.Spec, Status: c.Status}
}

func toClusterBinding(b *workv1alpha1.ResourceBinding) *workv1alpha1.ClusterResourceBinding {
	return &workv1alpha1.ClusterResourceBinding{ObjectMeta: b.ObjectMeta, Spec: b.Spec, Status: b.Status}
}

func toClusterTemplate(t *workv1alpha1.ResourceTemplate) *workv1alpha1.ClusterResourceTemplate {
	return &workv1alpha1.ClusterResourceTemplate{ObjectMeta: t.ObjectMeta, Spec: t.Spec, Status: t.Status}
}

// Templates reads and writes both template kinds.
type Templates struct {
	Client        flotillaclient.Interface
	Namespaced    worklisters.ResourceTemplateLister
	ClusterScoped worklisters.ClusterResourceTemplateLister
}

// Get returns the template of key from the cache (a copy of it is the
// caller's to change only after DeepCopy).
func (t *Templates) Get(key string) (*workv1alpha1.ResourceTemplate, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		c, err := t.ClusterScoped.Get(name)
		if err != nil {
			return nil, err
		}
		return FromClusterTemplate(c), nil
	}
	return t.Namespaced.ResourceTemplates(ns).Get(name)
}

// UpdateStatus writes a template's status.
func (t *Templates) UpdateStatus(ctx context.Context, tmpl *workv1alpha1.ResourceTemplate) error {
	var err error
	if tmpl.Namespace == "" {
		_, err = t.Client.WorkV1alpha1().ClusterResourceTemplates().UpdateStatus(ctx, toClusterTemplate(tmpl), metav1.UpdateOptions{})
	} else {
		_, err = t.Client.WorkV1alpha1().ResourceTemplates(tmpl.Namespace).UpdateStatus(ctx, tmpl, metav1.UpdateOptions{})
	}
	return err
}

// Bindings reads and writes both binding kinds.
type Bindings struct {
	Client        flotillaclient.Interface
	Namespaced    worklisters.ResourceBindingLister
	ClusterScoped worklisters.ClusterResourceBindingLister
}

// Get returns the binding of key from the cache.
func (b *Bindings) Get(key string) (*workv1alpha1.ResourceBinding, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		c, err := b.ClusterScoped.Get(name)
		if err != nil {
			return nil, err
		}
		return FromClusterBinding(c), nil
	}
	return b.Namespaced.ResourceBindings(ns).Get(name)
}

// Read returns the binding of key as the apiserver stores it now, not as
// the cache has it: for a decision made again at once after a write of it
// conflicted (the cache may not have the write that came first yet).
func (b *Bindings) Read(ctx context.Context, key string) (*workv1alpha1.ResourceBinding, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		c, err := b.Client.WorkV1alpha1().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return FromClusterBinding(c), nil
	}
	return b.Client.WorkV1alpha1().ResourceBindings(ns).Get(ctx, name, metav1.GetOptions{})
}

// Create creates a binding.
func (b *Bindings) Create(ctx context.Context, rb *workv1alpha1.ResourceBinding) error {
	var err error
	if rb.Namespace == "" {
		_, err = b.Client.WorkV1alpha1().ClusterResourceBindings().Create(ctx, toClusterBinding(rb), metav1.CreateOptions{})
	} else {
		_, err = b.Client.WorkV1alpha1().ResourceBindings(rb.Namespace).Create(ctx, rb, metav1.CreateOptions{})
	}
	return err
}

// Update writes a binding's metadata and spec, and returns what was stored.
func (b *Bindings) Update(ctx context.Context, rb *workv1alpha1.ResourceBinding) (*workv1alpha1.ResourceBinding, error) {
	if rb.Namespace == "" {
		out, err := b.Client.WorkV1alpha1().ClusterResourceBindings().Update(ctx, toClusterBinding(rb), metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
		return FromClusterBinding(out), nil
	}
	return b.Client.WorkV1alpha1().ResourceBindings(rb.Namespace).Update(ctx, rb, metav1.UpdateOptions{})
}

// PatchStatus writes the difference between base's status and
// updated's as a JSON merge patch of the status subresource, guarded by
// base's resourceVersion (a conflict, as an Update would get, when the
// stored binding moved on), and returns what was stored. It writes nothing
// and returns base when the statuses are equal.
//
// A patch, not an UpdateStatus: the hub caches bindings without
// status.schedulingDecision (cachetransform.Strip), and a status written
// whole from the cache would erase it. A field neither side has is left as
// stored.
func (b *Bindings) PatchStatus(ctx context.Context, base, updated *workv1alpha1.ResourceBinding) (*workv1alpha1.ResourceBinding, error) {
	data, err := statusMergePatch(base, updated)
	if err != nil || data == nil {
		return base, err
	}
	if base.Namespace == "" {
		out, err := b.Client.WorkV1alpha1().ClusterResourceBindings().Patch(ctx, base.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
		if err != nil {
			return nil, err
		}
		return FromClusterBinding(out), nil
	}
	return b.Client.WorkV1alpha1().ResourceBindings(base.Namespace).Patch(ctx, base.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
}

// statusMergePatch is the merge patch from base's status to updated's,
// with base's resourceVersion as the precondition; nil when they are
// equal.
func statusMergePatch(base, updated *workv1alpha1.ResourceBinding) ([]byte, error) {
	from, err := json.Marshal(base.Status)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(updated.Status)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, err
	}
	if string(diff) == "{}" {
		return nil, nil
	}
	if d := updated.Status.SchedulingDecision; d != nil && base.Status.SchedulingDecision == nil {
		// A decision the base does not show (the cache drops it) replaces
		// the stored one whole: a merge patch merges objects, which would
		// keep an old decision's fields the new one leaves empty
		// (affinityName, filteredCounts, omittedClusters).
		var status map[string]any
		if err := json.Unmarshal(diff, &status); err != nil {
			return nil, err
		}
		if status["schedulingDecision"], err = wholeObject(d); err != nil {
			return nil, err
		}
		if diff, err = json.Marshal(status); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": base.ResourceVersion},
		"status":   json.RawMessage(diff),
	})
}

// wholeObject is v (a struct) as a merge patch value that replaces the
// stored object rather than merging into it: every JSON field of v's type
// that v leaves out is null.
func wholeObject(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if _, ok := out[name]; !ok {
			out[name] = nil
		}
	}
	return out, nil
}

// Delete deletes a binding.
func (b *Bindings) Delete(ctx context.Context, rb *workv1alpha1.ResourceBinding) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rb.UID}}
	if rb.Namespace == "" {
		return b.Client.WorkV1alpha1().ClusterResourceBindings().Delete(ctx, rb.Name, opts)
	}
	return b.Client.WorkV1alpha1().ResourceBindings(rb.Namespace).Delete(ctx, rb.Name, opts)
}

// EnqueueKey returns an event handler function that adds the key of a
// template or binding object (of either kind, or a tombstone) to add.
func EnqueueKey(add func(string)) func(obj any) {
	return func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			add(Key(m))
		}
	}
}

// OwnerTemplateIndex indexes bindings by the key of the template that
// controls them.
const OwnerTemplateIndex = "byOwnerTemplate"

// OwnerTemplateKey is the OwnerTemplateIndex function.
func OwnerTemplateKey(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOf(m)
	if ref == nil || (ref.Kind != "ResourceTemplate" && ref.Kind != "ClusterResourceTemplate") {
		return nil, nil
	}
	if m.GetNamespace() == "" {
		return []string{ref.Name}, nil
	}
	return []string{m.GetNamespace() + "/" + ref.Name}, nil
}

// AddOwnerTemplateIndex adds OwnerTemplateIndex to binding informers that
// lack it (several controllers share them).
func AddOwnerTemplateIndex(informers ...cache.SharedIndexInformer) {
	for _, inf := range informers {
		if _, ok := inf.GetIndexer().GetIndexers()[OwnerTemplateIndex]; ok {
			continue
		}
		utilruntime.Must(inf.AddIndexers(cache.Indexers{OwnerTemplateIndex: OwnerTemplateKey}))
	}
}

// EvictCluster moves task.FromCluster out of spec.clusters into a graceful
// eviction task (its replicas and the clusters before the failover
// recorded) and the eviction history. It reports false, changing nothing,
// when the cluster is not targeted. The scheduler then sees replicas that
// no longer add up and places them elsewhere; the task keeps the old copy
// until the graceful eviction controller lets it go.
func EvictCluster(spec *workv1alpha1.ResourceBindingSpec, task workv1alpha1.GracefulEvictionTask, now metav1.Time) bool {
	i := slices.IndexFunc(spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == task.FromCluster })
	if i < 0 {
		return false
	}
	replicas := spec.Clusters[i].Replicas
	task.Replicas = &replicas
	task.CreationTimestamp = &now
	task.ClustersBeforeFailover = nil
	for _, t := range spec.Clusters {
		task.ClustersBeforeFailover = append(task.ClustersBeforeFailover, t.Name)
	}
	spec.Clusters = slices.Delete(slices.Clone(spec.Clusters), i, i+1)
	switch j := slices.IndexFunc(spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.FromCluster == task.FromCluster }); {
	case j < 0:
		spec.GracefulEvictionTasks = append(spec.GracefulEvictionTasks, task)
	case spec.GracefulEvictionTasks[j].Producer == workv1alpha1.EvictionProducerScheduler:
		// A placed cluster with a scheduler task is being shrunk gracefully
		// (a rebalance, a failback): the failure wins (its purge mode,
		// reason, and the scheduler keeps the cluster out while it lasts),
		// and the copy's size is what it runs now, the shrink's old count.
		old := spec.GracefulEvictionTasks[j]
		if old.Replicas != nil && *old.Replicas > replicas {
			task.Replicas = old.Replicas
		}
		spec.GracefulEvictionTasks = slices.Clone(spec.GracefulEvictionTasks)
		spec.GracefulEvictionTasks[j] = task
	}
	spec.EvictionHistory = append(spec.EvictionHistory, workv1alpha1.EvictionHistoryEntry{
		ClusterName: task.FromCluster, Reason: task.Reason, EvictedAt: now})
	spec.EvictionHistory = trimEvictionHistory(spec, now.Time)
	return true
}

// MaxEvictionHistory bounds a binding's eviction history: the newest
// entries are the ones the scheduler's TTL can still care about.
const MaxEvictionHistory = 16

// NewBindings wires a Bindings accessor to factory's informers of both
// binding kinds and returns it with those informers, for event handlers and
// cache sync.
func NewBindings(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory) (*Bindings, []cache.SharedIndexInformer) {
	rb, crb := factory.Work().V1alpha1().ResourceBindings(), factory.Work().V1alpha1().ClusterResourceBindings()
	return &Bindings{Client: client, Namespaced: rb.Lister(), ClusterScoped: crb.Lister()},
		[]cache.SharedIndexInformer{rb.Informer(), crb.Informer()}
}

// Synced returns the HasSynced functions of informers.
func Synced(informers ...cache.SharedIndexInformer) []cache.InformerSynced {
	out := make([]cache.InformerSynced, len(informers))
	for i, inf := range informers {
		out[i] = inf.HasSynced
	}
	return out
}

// SpecOf returns the spec of a binding of either kind, nil for other objects.
func SpecOf(obj any) *workv1alpha1.ResourceBindingSpec {
	switch b := obj.(type) {
	case *workv1alpha1.ResourceBinding:
		return &b.Spec
	case *workv1alpha1.ClusterResourceBinding:
		return &b.Spec
	}
	return nil
}

// Each calls f with the key and spec of every cached binding of both kinds.
func (b *Bindings) Each(f func(key string, spec *workv1alpha1.ResourceBindingSpec)) {
	list, _ := b.Namespaced.List(labels.Everything())
	for _, rb := range list {
		f(Key(rb), &rb.Spec)
	}
	clusterList, _ := b.ClusterScoped.List(labels.Everything())
	for _, crb := range clusterList {
		f(Key(crb), &crb.Spec)
	}
}
