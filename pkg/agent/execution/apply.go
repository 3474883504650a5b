package execution

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Manifest outcomes, used as reasons in conditions and metrics.
const (
	OutcomeApplied   = "Applied"
	OutcomeUnchanged = "Unchanged"
	OutcomeConflict  = "Conflict"
	OutcomeInvalid   = "InvalidManifest"
	OutcomeNoKind    = "KindNotServed"
	OutcomeNotFound  = "NotFound" // ReadOnly: the object does not exist
	OutcomeFailed    = "ApplyFailed"
)

// manifestResult is what happened to one manifest.
type manifestResult struct {
	identifier workv1alpha1.ResourceIdentifier
	outcome    string
	err        error
	live       *unstructured.Unstructured
}

func (r manifestResult) ok() bool {
	return r.err == nil
}

// decode turns a manifest into an object and its mapping on this member.
func (c *Controller) decode(m workv1alpha1.Manifest, ordinal int) (*unstructured.Unstructured, *meta.RESTMapping, manifestResult) {
	res := manifestResult{identifier: workv1alpha1.ResourceIdentifier{Ordinal: int32(ordinal)}}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(m.Raw, &obj.Object); err != nil {
		res.outcome, res.err = OutcomeInvalid, fmt.Errorf("manifest is not a JSON object: %v", err)
		return nil, nil, res
	}
	gvk := obj.GroupVersionKind()
	res.identifier.Group, res.identifier.Version, res.identifier.Kind = gvk.Group, gvk.Version, gvk.Kind
	res.identifier.Namespace, res.identifier.Name = obj.GetNamespace(), obj.GetName()
	if gvk.Kind == "" || gvk.Version == "" || obj.GetName() == "" {
		res.outcome, res.err = OutcomeInvalid, fmt.Errorf("manifest needs apiVersion, kind and metadata.name")
		return nil, nil, res
	}
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// The member may have gained the kind (a CRD) since discovery ran.
		c.mapper.Reset()
		mapping, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		res.outcome, res.err = OutcomeNoKind, fmt.Errorf("%s is not served by this member: %v", gvk, err)
		return nil, nil, res
	}
	res.identifier.Resource = mapping.Resource.Resource
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
			res.identifier.Namespace = metav1.NamespaceDefault
		}
	} else {
		obj.SetNamespace("")
		res.identifier.Namespace = ""
	}
	return obj, mapping, res
}

// apply brings one manifest's object to the member according to the Work's
// strategy and returns the outcome with the live object.
func (c *Controller) apply(ctx context.Context, work *workv1alpha1.Work, ordinal int) manifestResult {
	desired, mapping, res := c.decode(work.Spec.Workload.Manifests[ordinal], ordinal)
	if res.err != nil {
		return res
	}
	gvr := mapping.Resource
	live, err := c.get(ctx, gvr, desired.GetNamespace(), desired.GetName())
	if err != nil {
		res.outcome, res.err = OutcomeFailed, err
		return res
	}
	res.live = live

	strategy := work.Spec.ApplyStrategy
	if strategy == workv1alpha1.ApplyStrategyReadOnly {
		if live == nil {
			res.outcome, res.err = OutcomeNotFound, fmt.Errorf("%s %s not found (ReadOnly Work: nothing is created)", desired.GetKind(), displayName(desired))
		} else {
			res.outcome = OutcomeUnchanged
		}
		return res
	}
	if live != nil {
		if owner := workOf(live); owner != workKey(work) {
			if owner != "" && work.Spec.ConflictResolution != policyv1alpha1.ConflictOverwrite {
				res.outcome, res.err = OutcomeConflict, fmt.Errorf("%s %s is managed by Work %s", desired.GetKind(), displayName(desired), owner)
				return res
			}
			if owner == "" && work.Spec.ConflictResolution != policyv1alpha1.ConflictOverwrite {
				res.outcome, res.err = OutcomeConflict, fmt.Errorf("%s %s exists and is not managed by Flotilla (set conflictResolution: Overwrite to adopt it)", desired.GetKind(), displayName(desired))
				return res
			}
		} else if strategy == workv1alpha1.ApplyStrategyCreateOnly {
			res.outcome = OutcomeUnchanged
			return res
		}
	}

	hash := manifestHash(desired)
	c.stamp(desired, work, hash)
	if live != nil && live.GetAnnotations()[workv1alpha1.AnnotationManifestHash] == hash && isSubset(desired.Object, live.Object) {
		res.outcome = OutcomeUnchanged
		return res
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if err := c.ensureNamespace(ctx, desired.GetNamespace(), work); err != nil {
			res.outcome, res.err = OutcomeFailed, err
			return res
		}
	}
	data, err := json.Marshal(desired.Object)
	if err != nil {
		res.outcome, res.err = OutcomeInvalid, err
		return res
	}
	applied, err := c.member.Resource(gvr).Namespace(desired.GetNamespace()).Patch(ctx, desired.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: c.opts.FieldManager, Force: ptr.To(true)})
	if err != nil {
		res.outcome, res.err = applyOutcome(err), err
		return res
	}
	c.objects.recordWrite(applied)
	res.outcome, res.live = OutcomeApplied, applied
	return res
}

func applyOutcome(err error) string {
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return OutcomeInvalid
	case apierrors.IsConflict(err):
		return OutcomeConflict
	default:
		return OutcomeFailed
	}
}

// get reads the member object, from the informer cache when it can.
func (c *Controller) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if obj, exists, ok := c.objects.cached(gvr, namespace, name); ok {
		if exists {
			return obj, nil
		}
		// The cache only holds managed objects: ask the metadata cache
		// whether anything of that name exists before paying a GET.
		if exists, known := c.objects.exists(gvr, namespace, name); known && !exists {
			return nil, nil
		}
	}
	obj, err := c.member.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// stamp adds Flotilla's label and annotations to a desired object.
func (c *Controller) stamp(obj *unstructured.Unstructured, work *workv1alpha1.Work, hash string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[workv1alpha1.LabelManaged] = "true"
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[workv1alpha1.AnnotationWorkNamespace] = work.Namespace
	annotations[workv1alpha1.AnnotationWorkName] = work.Name
	annotations[workv1alpha1.AnnotationManifestHash] = hash
	obj.SetAnnotations(annotations)
	// Fields a manifest must not carry into an apply.
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetManagedFields(nil)
	obj.SetCreationTimestamp(metav1.Time{})
	unstructured.RemoveNestedField(obj.Object, "status")
}

// ensureNamespace creates a missing namespace, labelled managed.
func (c *Controller) ensureNamespace(ctx context.Context, name string, work *workv1alpha1.Work) error {
	if _, ok := c.namespaces.Load(name); ok {
		return nil
	}
	_, err := c.memberKube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{workv1alpha1.LabelManaged: "true"},
			Annotations: map[string]string{workv1alpha1.AnnotationWorkNamespace: work.Namespace, workv1alpha1.AnnotationWorkName: work.Name}}}
		_, err = c.memberKube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("ensuring namespace %s: %w", name, err)
	}
	c.namespaces.Store(name, struct{}{})
	return nil
}

// workOf is "<namespace>/<name>" of the Work a managed object came from, ""
// when the object is not managed by Flotilla.
func workOf(obj *unstructured.Unstructured) string {
	if obj.GetLabels()[workv1alpha1.LabelManaged] != "true" {
		return ""
	}
	a := obj.GetAnnotations()
	return a[workv1alpha1.AnnotationWorkNamespace] + "/" + a[workv1alpha1.AnnotationWorkName]
}

func workKey(w *workv1alpha1.Work) string { return w.Namespace + "/" + w.Name }

func displayName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// manifestHash identifies the desired object as written in the Work.
func manifestHash(obj *unstructured.Unstructured) string {
	data, _ := json.Marshal(obj.Object)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// isSubset reports whether every field of desired has the same value in live
// (maps recursively; lists element by element, of equal length). Fields the
// apiserver or controllers add are ignored, so a live object that matches
// needs no apply; an edit of one of our fields does.
func isSubset(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, dv := range d {
			lv, ok := l[k]
			if !ok {
				if dv == nil {
					continue
				}
				return false
			}
			if !isSubset(dv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false
		}
		for i := range d {
			if !isSubset(d[i], l[i]) {
				return false
			}
		}
		return true
	case int64, float64, int, int32:
		return numbersEqual(d, live)
	default:
		return reflect.DeepEqual(desired, live)
	}
}

func numbersEqual(a, b any) bool {
	toFloat := func(v any) (float64, bool) {
		switch n := v.(type) {
		case int64:
			return float64(n), true
		case int:
			return float64(n), true
		case int32:
			return float64(n), true
		case float64:
			return n, true
		}
		return 0, false
	}
	x, ok1 := toFloat(a)
	y, ok2 := toFloat(b)
	return ok1 && ok2 && x == y
}
