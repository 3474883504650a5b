package workobjects

import (
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// WorkName keeps 200 characters of a binding's name and 40 bits of hash:
// two bindings can map to one Work name (long names sharing their first
// 200 characters, or a Work someone else made under that name). The hub
// therefore never takes a Work by its name alone: it writes, reads and
// waits for a Work only when the Work names the binding as its owner.

// WorkOwner is the binding a Work names as its owner, "namespace/name"
// ("name" for a ClusterResourceBinding), from its binding annotations; ""
// when it has none.
func WorkOwner(w *workv1alpha1.Work) string {
	name, ok := w.Annotations[AnnotationBindingName]
	if !ok {
		return ""
	}
	if ns := w.Annotations[AnnotationBindingNamespace]; ns != "" {
		return ns + "/" + name
	}
	return name
}

// OwnsWork reports whether binding owns w: w names the binding in its
// annotations, or, for a Work of a hub that did not write them yet, carries
// the binding's UID label. A binding re-created under the same name owns
// its predecessor's Work (it renders the same object).
func OwnsWork(binding *workv1alpha1.ResourceBinding, w *workv1alpha1.Work) bool {
	if _, ok := w.Annotations[AnnotationBindingName]; ok {
		return w.Annotations[AnnotationBindingName] == binding.Name && w.Annotations[AnnotationBindingNamespace] == binding.Namespace
	}
	return binding.UID != "" && w.Labels[LabelBindingUID] == string(binding.UID)
}
