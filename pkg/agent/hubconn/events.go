package hubconn

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/flotilla-io/flotilla/pkg/clusterevents"
	flotillascheme "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
)

// NewEventRecorder returns a recorder of events on hub objects, and a
// function that stops it. Every event lands in the cluster's own hub
// namespace: Works live there, and events about the cluster-scoped Cluster
// are filed there too (clusterevents), so the agent's hub identity needs to
// create events nowhere else; `kubectl get events -n flotilla-es-<cluster>`
// shows them.
func NewEventRecorder(hub kubernetes.Interface, component string) (record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: hub.CoreV1().Events("")})
	return clusterevents.Recorder(broadcaster.NewRecorder(flotillascheme.Scheme, corev1.EventSource{Component: component})), broadcaster.Shutdown
}
