// Package cachetransform trims objects before the hub's informers cache
// them. At fleet scale the cache is most of the hub's memory (10,000
// templates: 10,000 bindings and 20,000 Works), and a good part of each
// cached object is bookkeeping the hub never reads.
package cachetransform

import (
	"k8s.io/apimachinery/pkg/api/meta"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// AnnotationLastApplied is kubectl's client-side apply record: a second
// copy of the whole object as last applied.
const AnnotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Strip is the hub informers' cache.TransformFunc. It drops from every
// object metadata.managedFields, from templates the kubectl last-applied
// annotation, from bindings status.schedulingDecision, and from Works their
// manifests, which it replaces by a digest (see DigestManifests). A Work's
// status, which its member's agent writes and the hub does not trust, is
// held to statuslimits' bounds (statuslimits.WorkStatus) before any hub
// controller reads it. It
// changes the object in place (client-go hands the transform a freshly
// decoded object) and is idempotent.
//
// Why this is safe for the hub's writes:
//   - managedFields: an Update or UpdateStatus whose object has no
//     managedFields keeps the stored ones (the apiserver resets them only for
//     an explicit empty list), and the hub uses no server-side apply.
//   - last-applied: the hub writes templates only through UpdateStatus (the
//     status subresource ignores metadata). A controller that ever Updates a
//     template from the cache must patch instead, or it would erase the
//     annotation and break the user's next `kubectl apply`.
//   - schedulingDecision (up to 128 verdicts, most of a binding's size at
//     fleet scale): the hub writes binding statuses only as merge patches of
//     what changed (workobjects.Bindings.PatchStatus), which keep a field the
//     patch does not name; the scheduler's patch carries a new decision
//     whole. Binding Updates go to the main resource, which ignores status.
//   - Work manifests (a second copy of every template per target cluster):
//     the binding controller compares a digest and writes a Work's spec
//     whole from what it renders, never from the cache.
//   - Work status: the agent writes it; the hub never writes a Work's
//     status, and a Work Update ignores it.
//
// Nothing in the hub reads any of these from the cache: the binding
// controller cleans managedFields out of the manifest it renders, which is
// inside spec.manifest and not touched here, and `kubectl flotilla explain`
// reads the decision from the apiserver.
func Strip(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		// A DeletedFinalStateUnknown tombstone: its object was stripped
		// when it was cached.
		return obj, nil
	}
	m.SetManagedFields(nil)
	switch o := obj.(type) {
	case *workv1alpha1.ResourceBinding:
		o.Status.SchedulingDecision = nil
	case *workv1alpha1.ClusterResourceBinding:
		o.Status.SchedulingDecision = nil
	case *workv1alpha1.Work:
		DigestManifests(o.Spec.Workload.Manifests)
		statuslimits.WorkStatus(&o.Status)
	case *workv1alpha1.ResourceTemplate, *workv1alpha1.ClusterResourceTemplate:
		if a := m.GetAnnotations(); a != nil {
			if _, ok := a[AnnotationLastApplied]; ok {
				delete(a, AnnotationLastApplied)
				if len(a) == 0 {
					m.SetAnnotations(nil)
				}
			}
		}
	}
	return obj, nil
}
