package binding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/lru"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Labels and annotations of a revision (a ControllerRevision in the hub's
// namespace).
const (
	// LabelRevisionBinding is the binding's UID.
	LabelRevisionBinding = "flotilla.io/binding-uid"
	// AnnotationRevisionHash is the SHA-256 of the revision's object.
	AnnotationRevisionHash = "flotilla.io/revision-hash"
	// AnnotationRevisionBinding is the binding, namespace/name.
	AnnotationRevisionBinding = "flotilla.io/binding"
)

// Revisions keeps the numbered revisions of the templates' objects as
// ControllerRevisions (apps/v1, the type Kubernetes keeps DaemonSet and
// StatefulSet history in) in the hub's own namespace: tenants cannot
// write there, so a revision the hub renders is always one it recorded
// from a template the detector checked. The cache holds no revision's
// data (a fleet's history would be most of the hub's memory); the data of
// the revisions rollouts render is read on demand and kept in a small LRU
// (revisionCacheEntries, revisionCacheBytes).
type Revisions struct {
	client    kubernetes.Interface
	namespace string
	factory   informers.SharedInformerFactory
	lister    appslisters.ControllerRevisionNamespaceLister
	indexer   cache.Indexer
	synced    cache.InformerSynced
	objects   *lru.Cache
	nsOnce    sync.Mutex
	nsMade    bool
}

const revisionIndex = "byBinding"

// The revisions' data the hub keeps in memory: at most revisionCacheEntries
// of at most revisionCacheBytes each (4 MiB in all), so that a tenant's
// large templates cannot grow the hub's memory; a larger one is read from
// the API each time a rollout renders it.
const (
	revisionCacheEntries = 64
	revisionCacheBytes   = 64 << 10
)

func (r *Revisions) remember(name string, raw []byte) {
	if len(raw) <= revisionCacheBytes {
		r.objects.Add(name, raw)
	}
}

// NewRevisions keeps revisions in namespace (the hub's leader-election
// namespace).
func NewRevisions(client kubernetes.Interface, namespace string) *Revisions {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelRevisionBinding }),
		informers.WithTransform(func(obj any) (any, error) {
			if cr, ok := obj.(*appsv1.ControllerRevision); ok {
				cr.Data = runtime.RawExtension{}
				cr.ManagedFields = nil
			}
			return obj, nil
		}))
	inf := factory.Apps().V1().ControllerRevisions()
	_ = inf.Informer().AddIndexers(cache.Indexers{revisionIndex: func(obj any) ([]string, error) {
		if uid := obj.(metav1.Object).GetLabels()[LabelRevisionBinding]; uid != "" {
			return []string{uid}, nil
		}
		return nil, nil
	}})
	return &Revisions{client: client, namespace: namespace, factory: factory, lister: inf.Lister().ControllerRevisions(namespace),
		indexer: inf.Informer().GetIndexer(), synced: inf.Informer().HasSynced, objects: lru.New(revisionCacheEntries)}
}

// OnDelete calls f with the binding key of every revision deleted (by
// hand, or pruned): its binding records its template again at once.
func (r *Revisions) OnDelete(f func(bindingKey string)) {
	_, _ = r.factory.Apps().V1().ControllerRevisions().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			r.objects.Remove(m.GetName())
			if key := m.GetAnnotations()[AnnotationRevisionBinding]; key != "" {
				f(key)
			}
		}
	}})
}

// Start starts the watch; it ends with ctx.
func (r *Revisions) Start(ctx context.Context) {
	r.factory.Start(ctx.Done())
	go func() { <-ctx.Done(); r.factory.Shutdown() }()
}

// HasSynced reports whether the cache has listed the revisions.
func (r *Revisions) HasSynced() bool { return r.synced() }

// revisionContent is what a revision records of the template's object:
// the object as a member receives it before replicas and overrides (the
// replica count is the scheduler's, so a scale is not a revision).
func revisionContent(obj *unstructured.Unstructured, replicas bool, reviser ReplicaReviser) ([]byte, error) {
	o := obj.DeepCopy()
	cleanForRevision(o)
	if replicas && reviser != nil {
		if err := reviser.ReviseReplica(o, 0); err != nil {
			return nil, err
		}
	}
	return json.Marshal(o.Object)
}

// ReplicaReviser sets an object's replica count.
type ReplicaReviser interface {
	ReviseReplica(obj *unstructured.Unstructured, replicas int32) error
}

func cleanForRevision(o *unstructured.Unstructured) {
	unstructured.RemoveNestedField(o.Object, "status")
	for _, f := range []string{"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields", "selfLink", "ownerReferences", "deletionTimestamp"} {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
}

// List returns the binding's revisions, oldest first (without data).
func (r *Revisions) List(binding *workv1alpha1.ResourceBinding) []*appsv1.ControllerRevision {
	objs, _ := r.indexer.ByIndex(revisionIndex, string(binding.UID))
	out := make([]*appsv1.ControllerRevision, 0, len(objs))
	for _, o := range objs {
		cr := o.(*appsv1.ControllerRevision)
		if cr.DeletionTimestamp == nil {
			out = append(out, cr)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out
}

func revisionName(binding *workv1alpha1.ResourceBinding, rev int64) string {
	return string(binding.UID) + "-" + strconv.FormatInt(rev, 10)
}

// Ensure returns the number of the revision content is: the newest
// revision when it has the same content, else a new revision numbered one
// more (content that returns to an older revision's is a new revision, as
// a Deployment's rollback is: numbers only grow). floor is the highest
// revision the binding's status knows: numbers never go below it, even
// when revisions were deleted by hand (a number reused for other content
// would make the hub take a new revision for the stable one).
func (r *Revisions) Ensure(ctx context.Context, binding *workv1alpha1.ResourceBinding, content []byte, templateGeneration, floor int64) (int64, error) {
	sum := sha256.Sum256(content)
	hash := hex.EncodeToString(sum[:])
	list := r.List(binding)
	top := floor
	var newest *appsv1.ControllerRevision
	if n := len(list); n > 0 && list[n-1].Revision >= top {
		newest, top = list[n-1], list[n-1].Revision
	}
	if newest == nil && top > 0 {
		// The cache does not hold the top revision (it is behind, or the
		// revision was deleted): the API decides.
		got, err := r.client.AppsV1().ControllerRevisions(r.namespace).Get(ctx, revisionName(binding, top), metav1.GetOptions{})
		switch {
		case err == nil && got.Labels[LabelRevisionBinding] == string(binding.UID):
			newest = got
		case err != nil && !apierrors.IsNotFound(err):
			return 0, err
		}
	}
	if newest != nil && newest.Annotations[AnnotationRevisionHash] == hash {
		return newest.Revision, nil
	}
	next := top + 1
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: revisionName(binding, next), Namespace: r.namespace,
			Labels: map[string]string{LabelRevisionBinding: string(binding.UID), "app.kubernetes.io/managed-by": "flotilla-hub"},
			Annotations: map[string]string{AnnotationRevisionHash: hash, AnnotationRevisionBinding: workobjects.Key(binding),
				workv1alpha1.AnnotationTemplateGeneration: strconv.FormatInt(templateGeneration, 10)}},
		Data:     runtime.RawExtension{Raw: content},
		Revision: next,
	}
	_, err := r.client.AppsV1().ControllerRevisions(r.namespace).Create(ctx, cr, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) && r.makeNamespace(ctx) {
		_, err = r.client.AppsV1().ControllerRevisions(r.namespace).Create(ctx, cr, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		// The cache is behind: the stored one decides.
		got, gerr := r.client.AppsV1().ControllerRevisions(r.namespace).Get(ctx, cr.Name, metav1.GetOptions{})
		if gerr != nil {
			return 0, gerr
		}
		if got.Labels[LabelRevisionBinding] != string(binding.UID) {
			return 0, fmt.Errorf("revision %s/%s belongs to another binding", r.namespace, cr.Name)
		}
		if got.Annotations[AnnotationRevisionHash] == hash {
			return got.Revision, nil
		}
		return 0, fmt.Errorf("revision %d of %s was recorded meanwhile with other content; retrying", next, workobjects.Key(binding))
	}
	if err != nil {
		return 0, err
	}
	r.remember(cr.Name, content)
	return next, nil
}

// makeNamespace creates the hub's namespace when it is missing (a hub run
// outside its Deployment), and says whether it is there now (a create
// refused for want of it may be tried again).
func (r *Revisions) makeNamespace(ctx context.Context) bool {
	r.nsOnce.Lock()
	defer r.nsOnce.Unlock()
	if r.nsMade {
		return true
	}
	_, err := r.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace}}, metav1.CreateOptions{})
	r.nsMade = err == nil || apierrors.IsAlreadyExists(err)
	return r.nsMade
}

// Object returns the object revision rev of the binding recorded, or nil
// when there is no such revision (pruned, or deleted by hand).
func (r *Revisions) Object(ctx context.Context, binding *workv1alpha1.ResourceBinding, rev int64) (*unstructured.Unstructured, error) {
	name := revisionName(binding, rev)
	raw, ok := r.objects.Get(name)
	if !ok {
		cr, err := r.client.AppsV1().ControllerRevisions(r.namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if cr.Labels[LabelRevisionBinding] != string(binding.UID) {
			return nil, nil
		}
		raw = cr.Data.Raw
		r.remember(name, cr.Data.Raw)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw.([]byte)); err != nil {
		return nil, fmt.Errorf("revision %d of %s: %w", rev, workobjects.Key(binding), err)
	}
	return obj, nil
}

// Prune deletes the binding's revisions beyond the newest limit, except
// those in keep (the newest, the stable one, those a cluster runs).
func (r *Revisions) Prune(ctx context.Context, binding *workv1alpha1.ResourceBinding, keep map[int64]bool, limit int) error {
	list := r.List(binding)
	extra := len(list) - 1 - limit
	for _, cr := range list {
		if extra <= 0 {
			break
		}
		if keep[cr.Revision] {
			continue
		}
		if err := r.delete(ctx, cr); err != nil {
			return err
		}
		extra--
	}
	return nil
}

// DeleteAll deletes every revision of the binding (it is being deleted).
func (r *Revisions) DeleteAll(ctx context.Context, binding *workv1alpha1.ResourceBinding) error {
	for _, cr := range r.List(binding) {
		if err := r.delete(ctx, cr); err != nil {
			return err
		}
	}
	return nil
}

func (r *Revisions) delete(ctx context.Context, cr *appsv1.ControllerRevision) error {
	r.objects.Remove(cr.Name)
	err := r.client.AppsV1().ControllerRevisions(r.namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cr.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Generation is the template generation a revision was recorded at.
func revisionGeneration(cr *appsv1.ControllerRevision) int64 {
	n, _ := strconv.ParseInt(cr.Annotations[workv1alpha1.AnnotationTemplateGeneration], 10, 64)
	return n
}
