package hubconn

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	flotillascheme "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
)

// NewEventRecorder returns a recorder of events on hub objects, and a
// function that stops it. Events about the cluster-scoped Cluster land in
// namespace "default" (the apiserver allows no other place for them), so the
// agent's hub identity needs to create events there and in its own
// namespace; `kubectl describe cluster` shows them.
func NewEventRecorder(hub kubernetes.Interface, component string) (record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: hub.CoreV1().Events("")})
	return broadcaster.NewRecorder(flotillascheme.Scheme, corev1.EventSource{Component: component}), broadcaster.Shutdown
}
