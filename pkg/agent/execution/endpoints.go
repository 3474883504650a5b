package execution

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// serviceIndex indexes EndpointSlices by their Service ("namespace/name").
const serviceIndex = "flotilla.io/service"

// endpointCounter counts the ready endpoints of the Services the agent
// applied, from the member's EndpointSlices, and requeues the Work of a
// Service whose slices change, so the hub learns within one status write
// that a cluster's backends went unready (or ready).
type endpointCounter struct {
	informer cache.SharedIndexInformer
	// works maps a Service ("namespace/name") to the Work that applied it.
	works sync.Map
}

func newEndpointCounter(kube kubernetes.Interface, requeue func(work string)) *endpointCounter {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trimSlice))
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	e := &endpointCounter{informer: inf}
	_ = inf.AddIndexers(cache.Indexers{serviceIndex: func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
			return nil, nil
		}
		return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
	}})
	onEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		if w, ok := e.works.Load(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]); ok {
			requeue(w.(string))
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onEvent, UpdateFunc: func(_, n any) { onEvent(n) }, DeleteFunc: onEvent})
	return e
}

// trimSlice keeps what counting needs: a member may hold many large slices.
func trimSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{AddressType: s.AddressType}
	out.Name, out.Namespace, out.ResourceVersion, out.UID = s.Name, s.Namespace, s.ResourceVersion, s.UID
	if n := s.Labels[discoveryv1.LabelServiceName]; n != "" {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: n}
	}
	for _, ep := range s.Endpoints {
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready}})
	}
	return out, nil
}

func (e *endpointCounter) run(stop <-chan struct{}) { e.informer.Run(stop) }

// readyEndpoints is the ready endpoints of the Service live (applied by
// work), or nil when they cannot be told: the slices are not listed yet,
// or the Service selects no pods (ExternalName, or no selector) and has
// no slices. Ready unset counts as ready, as the EndpointSlice API asks.
// Dual-stack Services have a slice per address family: the larger family
// count is the count.
func (e *endpointCounter) readyEndpoints(work string, live *unstructured.Unstructured) *int32 {
	if e == nil || live == nil || live.GetAPIVersion() != "v1" || live.GetKind() != "Service" {
		return nil
	}
	key := live.GetNamespace() + "/" + live.GetName()
	e.works.Store(key, work)
	if !e.informer.HasSynced() {
		return nil
	}
	typ, _, _ := unstructured.NestedString(live.Object, "spec", "type")
	selector, _, _ := unstructured.NestedStringMap(live.Object, "spec", "selector")
	slices, _ := e.informer.GetIndexer().ByIndex(serviceIndex, key)
	if typ == string(corev1.ServiceTypeExternalName) || len(selector) == 0 && len(slices) == 0 {
		return nil
	}
	perFamily := map[discoveryv1.AddressType]int{}
	for _, o := range slices {
		s := o.(*discoveryv1.EndpointSlice)
		for _, ep := range s.Endpoints {
			if ptr.Deref(ep.Conditions.Ready, true) {
				perFamily[s.AddressType]++
			}
		}
	}
	n := 0
	for _, c := range perFamily {
		n = max(n, c)
	}
	return ptr.To(int32(min(n, statuslimits.MaxReadyEndpoints)))
}

// forget drops the Services of a Work that is gone.
func (e *endpointCounter) forget(work string) {
	if e == nil {
		return
	}
	e.works.Range(func(k, v any) bool {
		if v.(string) == work {
			e.works.Delete(k)
		}
		return true
	})
}
