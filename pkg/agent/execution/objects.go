package execution

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// objectWatcher keeps informers on the member objects Flotilla manages (label
// flotilla.io/managed=true), one per resource, started the first time a Work
// needs that resource. Their events drive drift repair and health updates;
// their caches spare the apiserver a GET per manifest per sync.
type objectWatcher struct {
	factory dynamicinformer.DynamicSharedInformerFactory
	// metadata caches the metadata of every object of a watched resource,
	// managed or not, so "does it exist?" costs no request.
	metadata      metadatainformer.SharedInformerFactory
	metaInformers map[schema.GroupVersionResource]cache.SharedIndexInformer
	onEvent       func(obj *unstructured.Unstructured)
	stop          <-chan struct{}

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	// listed holds, per informer, a channel closed once its first list is
	// in or firstListWait has passed.
	listed map[cache.SharedIndexInformer]chan struct{}

	// ownWrites maps an object key to the resourceVersion our last write
	// produced, so the event of our own write does not trigger work.
	ownWrites sync.Map
}

func newObjectWatcher(client dynamic.Interface, metaClient metadata.Interface, stop <-chan struct{}, onEvent func(*unstructured.Unstructured)) *objectWatcher {
	selector := labels.SelectorFromSet(labels.Set{workv1alpha1.LabelManaged: "true"}).String()
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, "", func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	})
	metaFactory := metadatainformer.NewSharedInformerFactoryWithOptions(metaClient, 0,
		metadatainformer.WithTransform(func(obj any) (any, error) {
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				m.ManagedFields = nil
			}
			return obj, nil
		}))
	return &objectWatcher{factory: factory, metadata: metaFactory, onEvent: onEvent, stop: stop,
		informers:     map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		metaInformers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		listed:        map[cache.SharedIndexInformer]chan struct{}{}}
}

// firstListWait bounds how long a sync waits for a new informer's first
// list before it reads the member with GETs instead. Without the wait, an
// agent restarted with thousands of Works GETs every object its workers
// reach while the list is still arriving; with it, a resource the agent
// cannot list delays only the syncs of that first interval.
const firstListWait = 30 * time.Second

// run starts inf, and records in w.listed the channel closed once its first
// list is in or firstListWait has passed. The caller holds w.mu.
func (w *objectWatcher) run(inf cache.SharedIndexInformer) {
	go inf.Run(w.stop)
	ready := make(chan struct{})
	w.listed[inf] = ready
	go func() {
		defer close(ready)
		timeout := time.NewTimer(firstListWait)
		defer timeout.Stop()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !inf.HasSynced() {
			select {
			case <-w.stop:
				return
			case <-timeout.C:
				return
			case <-tick.C:
			}
		}
	}()
}

// waitListed waits for inf's first list (see run), at most until ctx ends,
// and reports whether its cache has synced.
func (w *objectWatcher) waitListed(ctx context.Context, inf cache.SharedIndexInformer) bool {
	w.mu.Lock()
	ready := w.listed[inf]
	w.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	return inf.HasSynced()
}

// exists answers from the metadata cache whether an object exists at all;
// known is false while that cache has not synced.
func (w *objectWatcher) exists(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (exists, known bool) {
	w.mu.Lock()
	inf, ok := w.metaInformers[gvr]
	if !ok {
		inf = w.metadata.ForResource(gvr).Informer()
		w.metaInformers[gvr] = inf
		w.run(inf)
	}
	w.mu.Unlock()
	if !w.waitListed(ctx, inf) {
		return false, false
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	_, exists, err := inf.GetStore().GetByKey(key)
	return exists, err == nil
}

// informer returns the started informer for gvr.
func (w *objectWatcher) informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	w.mu.Lock()
	inf, ok := w.informers[gvr]
	if !ok {
		inf = w.factory.ForResource(gvr).Informer()
		_ = inf.SetTransform(stripManagedFields)
		_ = inf.AddIndexers(cache.Indexers{byWorkIndex: indexByWork})
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			// Adds are the initial list (every Work is synced at start
			// anyway) or our own creations: no work to do.
			UpdateFunc: func(_, obj any) { w.handle(obj) },
			DeleteFunc: w.handle,
		})
		w.informers[gvr] = inf
		w.run(inf)
	}
	w.mu.Unlock()
	return inf
}

func (w *objectWatcher) handle(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if rv, ok := w.ownWrites.Load(objectKey(u)); ok && rv == u.GetResourceVersion() {
		return
	}
	w.onEvent(u)
}

// recordWrite notes the resourceVersion our write produced.
func (w *objectWatcher) recordWrite(u *unstructured.Unstructured) {
	w.ownWrites.Store(objectKey(u), u.GetResourceVersion())
}

// cached returns the cached object, ok=false when the cache cannot answer.
func (w *objectWatcher) cached(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool, bool) {
	// Until it has synced, callers fall back to a GET.
	inf := w.informer(gvr)
	if !w.waitListed(ctx, inf) {
		return nil, false, false
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, exists, err := inf.GetStore().GetByKey(key)
	if err != nil {
		return nil, false, false
	}
	if !exists {
		return nil, false, true
	}
	return obj.(*unstructured.Unstructured), true, true
}

// byWorkIndex indexes managed objects by "<namespace>/<name>" of their Work.
const byWorkIndex = "work"

func indexByWork(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if key := workOf(u); key != "" {
		return []string{key}, nil
	}
	return nil, nil
}

// ownedObject is a cached managed object with its resource.
type ownedObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

// byWork lists the cached objects of every synced resource that carry the
// marks of Work workKey ("<namespace>/<name>").
func (w *objectWatcher) byWork(workKey string) []ownedObject {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ownedObject
	for gvr, inf := range w.informers {
		if !inf.HasSynced() {
			continue
		}
		objs, err := inf.GetIndexer().ByIndex(byWorkIndex, workKey)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			out = append(out, ownedObject{gvr: gvr, obj: obj.(*unstructured.Unstructured)})
		}
	}
	return out
}

// all lists every cached managed object of every watched resource.
func (w *objectWatcher) all() map[schema.GroupVersionResource][]*unstructured.Unstructured {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[schema.GroupVersionResource][]*unstructured.Unstructured{}
	for gvr, inf := range w.informers {
		if !inf.HasSynced() {
			continue
		}
		for _, obj := range inf.GetStore().List() {
			out[gvr] = append(out[gvr], obj.(*unstructured.Unstructured))
		}
	}
	return out
}

// stripManagedFields drops metadata.managedFields from cached managed
// objects: often the larger part of an object (a Deployment's lists every
// field of its spec), and read only by the one-time upgrade of our Create's
// entry before a server-side apply, which reads the object afresh
// (applyTo). The metadata cache strips them too.
func stripManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	return obj, nil
}

func objectKey(u *unstructured.Unstructured) string {
	return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}
