package binding

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// workConflictError: the Work a binding maps to in a cluster's namespace
// belongs to another binding (workobjects.OwnsWork). The hub neither
// writes nor reads it for this binding; the user renames one of the two.
type workConflictError struct {
	work *workv1alpha1.Work
}

func (e *workConflictError) Error() string {
	owner := workobjects.WorkOwner(e.work)
	if owner == "" {
		owner = "no binding (it names none)"
	} else {
		owner = "binding " + owner
	}
	return fmt.Sprintf("Work %s/%s belongs to %s, not to this one; it is neither written nor read for this binding until one of the two is renamed or the Work is removed",
		e.work.Namespace, e.work.Name, owner)
}

// boundObject reports whether obj is the object the binding names: the
// binding controller renders only what the detector bound.
func boundObject(ref workv1alpha1.ObjectReference, obj *unstructured.Unstructured) bool {
	return ref.APIVersion == obj.GetAPIVersion() && ref.Kind == obj.GetKind() &&
		ref.Namespace == obj.GetNamespace() && ref.Name == obj.GetName()
}
