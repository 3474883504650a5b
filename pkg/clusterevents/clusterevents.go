// Package clusterevents puts events about a Cluster in that cluster's hub
// namespace (flotilla-es-<cluster>) rather than in the shared "default".
//
// client-go files an event in its involved object's namespace, and for a
// cluster-scoped object that is "default": every agent identity would need
// to write events there, next to every other cluster's, and could forge
// events about any of them. The core/v1 Event validation accepts another
// namespace only when involvedObject.namespace equals it, so an event about
// a Cluster is recorded against a reference to the Cluster whose Namespace
// is the cluster's namespace; the apiserver does not check that the kind is
// namespaced. `kubectl get events -n flotilla-es-<cluster>` lists them.
package clusterevents

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// NamespacePrefix starts every cluster's namespace on the hub.
const NamespacePrefix = "flotilla-es-"

// Namespace is where the events about cluster are filed.
func Namespace(cluster string) string { return NamespacePrefix + cluster }

// Ref is the reference events about cluster are recorded against.
func Ref(cluster *clusterv1alpha1.Cluster) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion:      clusterv1alpha1.SchemeGroupVersion.String(),
		Kind:            "Cluster",
		Name:            cluster.Name,
		Namespace:       Namespace(cluster.Name),
		UID:             cluster.UID,
		ResourceVersion: cluster.ResourceVersion,
	}
}

// Recorder wraps r so that every event about a Cluster lands in the
// cluster's namespace; events about other objects pass through unchanged.
// Wrapping the recorder (not each call site) keeps a controller added later
// from filing cluster events in "default" again.
func Recorder(r record.EventRecorder) record.EventRecorder {
	if r == nil {
		return nil
	}
	if _, ok := r.(recorder); ok {
		return r
	}
	return recorder{r}
}

type recorder struct{ inner record.EventRecorder }

func target(object runtime.Object) runtime.Object {
	if cluster, ok := object.(*clusterv1alpha1.Cluster); ok && cluster != nil {
		return Ref(cluster)
	}
	return object
}

func (r recorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.inner.Event(target(object), eventtype, reason, message)
}

func (r recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.inner.Eventf(target(object), eventtype, reason, messageFmt, args...)
}

func (r recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.inner.AnnotatedEventf(target(object), annotations, eventtype, reason, messageFmt, args...)
}
