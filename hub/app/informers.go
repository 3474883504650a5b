package app

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
)

// newInformerFactories returns the informer factories the hub's controllers
// share: one for Flotilla's objects, one for the host objects the hub made
// for clusters. transform (the hub passes cachetransform.Strip; nil: none)
// trims every object before it is cached, which at fleet scale is most of
// the hub's memory (docs/benchmarks.md, "Hub memory").
func newInformerFactories(clients *clientBuilder, transform cache.TransformFunc) (flotillainformers.SharedInformerFactory, informers.SharedInformerFactory) {
	factory := flotillainformers.NewSharedInformerFactoryWithOptions(clients.flotilla("informers"), 0, flotillainformers.WithTransform(transform))
	// Only what the hub made for clusters (labelled with their cluster:
	// namespaces, Leases, agent identities), not every Lease, Role or
	// ServiceAccount of the host cluster (one Lease per node, elections…).
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(clients.kube("informers"), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = clusterlifecycle.LabelCluster }),
		informers.WithTransform(transform))
	return factory, kubeFactory
}
