package execution

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Manifest outcomes, used as reasons in conditions and metrics.
const (
	OutcomeApplied   = "Applied"
	OutcomeCreated   = "Created"
	OutcomeUnchanged = "Unchanged"
	OutcomeConflict  = "Conflict"
	OutcomeRefused   = "Refused"
	OutcomeInvalid   = "InvalidManifest"
	OutcomeNoKind    = "KindNotServed"
	OutcomeNotFound  = "NotFound" // ReadOnly: the object does not exist
	OutcomeFailed    = "ApplyFailed"
)

// Marks the agent puts on member objects besides the managed label and the
// Work annotations.
const (
	// AnnotationCreatedByFlotilla marks a member object the agent created
	// (with Create, so it did not exist before). Only such objects are ever
	// deleted; an adopted one (conflictResolution Overwrite) is released.
	AnnotationCreatedByFlotilla = "work.flotilla.io/created-by-flotilla"
	// LabelAutoCreatedNamespace marks a namespace the agent created because
	// a namespaced manifest needed it. It carries neither the managed label
	// nor a Work's annotations, so no Work owns it: it is never deleted or
	// released, whatever else lives in it.
	LabelAutoCreatedNamespace = "flotilla.io/auto-created-namespace"
)

// manifestResult is what happened to one manifest.
type manifestResult struct {
	identifier workv1alpha1.ResourceIdentifier
	outcome    string
	err        error
	live       *unstructured.Unstructured
	// decoded is true once the manifest's identity (kind, scope on this
	// member, namespace, name) is known, even if it was then refused.
	decoded bool
	// refusal is the Refused* reason of a refused manifest.
	refusal string
}

func (r manifestResult) ok() bool {
	return r.err == nil
}

// identityKey names a member object independently of its API version.
func identityKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

func (r manifestResult) key() string {
	id := r.identifier
	return identityKey(id.Group, id.Kind, id.Namespace, id.Name)
}

func liveKey(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	return identityKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
}

// decode turns a manifest into an object and its mapping on this member,
// defaults its namespace from the Work's source and refuses what the source
// may not produce or what is protected.
func (c *Controller) decode(work *workv1alpha1.Work, ordinal int) (*unstructured.Unstructured, *meta.RESTMapping, manifestResult) {
	res := manifestResult{identifier: workv1alpha1.ResourceIdentifier{Ordinal: int32(ordinal)}}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(work.Spec.Workload.Manifests[ordinal].Raw, &obj.Object); err != nil {
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
	src := sourceOf(work)
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(src.defaultNamespace())
		}
	} else {
		obj.SetNamespace("")
	}
	res.identifier.Namespace = obj.GetNamespace()
	res.decoded = true
	if reason, err := c.admission.admit(src, gvk, namespaced, obj.GetNamespace(), obj.GetName()); reason != "" {
		res.outcome, res.refusal, res.err = OutcomeRefused, reason, err
		return nil, nil, res
	}
	stripMarks(obj)
	return obj, mapping, res
}

// errRaced says the member changed between the agent's read and its write:
// the object was created, deleted or re-created meanwhile.
var errRaced = errors.New("the object changed on the member while it was being applied")

// apply brings one manifest's object to the member according to the Work's
// strategy and returns the outcome with the live object. A write that races
// with another writer is decided again once, on a fresh read.
func (c *Controller) apply(ctx context.Context, work *workv1alpha1.Work, ordinal int) manifestResult {
	desired, mapping, res := c.decode(work, ordinal)
	if res.err != nil {
		return res
	}
	gvr := mapping.Resource
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	live, err := c.get(ctx, gvr, desired.GetNamespace(), desired.GetName())
	for attempt := 0; ; attempt++ {
		if err != nil {
			res.outcome, res.err = OutcomeFailed, err
			return res
		}
		r := c.applyTo(ctx, work, desired.DeepCopy(), gvr, namespaced, live, res)
		if !errors.Is(r.err, errRaced) || attempt > 0 {
			return r
		}
		live, err = c.getLive(ctx, gvr, desired.GetNamespace(), desired.GetName())
	}
}

// applyTo decides on one reading of the member (live, nil when absent) and
// writes: Create when absent, server-side apply (with the live object's UID
// as precondition) when present and Flotilla's to change.
func (c *Controller) applyTo(ctx context.Context, work *workv1alpha1.Work, desired *unstructured.Unstructured, gvr schema.GroupVersionResource,
	namespaced bool, live *unstructured.Unstructured, res manifestResult) manifestResult {
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
	hash := manifestHash(desired)
	client := c.member.Resource(gvr).Namespace(desired.GetNamespace())
	if live == nil {
		if namespaced {
			if err := c.ensureNamespace(ctx, desired.GetNamespace()); err != nil {
				res.outcome, res.err = OutcomeFailed, err
				return res
			}
		}
		c.stamp(desired, work, hash, true)
		c.beforeWrite("create", desired)
		created, err := client.Create(ctx, desired, metav1.CreateOptions{FieldManager: c.opts.FieldManager})
		switch {
		case apierrors.IsAlreadyExists(err):
			// Someone else created it since the cache said absent: it
			// is theirs until the conflict handling says otherwise.
			res.outcome, res.err = OutcomeFailed, fmt.Errorf("%w (created by someone else)", errRaced)
		case apierrors.IsNotFound(err) && namespaced:
			// Its namespace went away since we saw it.
			c.namespaces.Delete(desired.GetNamespace())
			res.outcome, res.err = OutcomeFailed, err
		case err != nil:
			res.outcome, res.err = applyOutcome(err), err
		default:
			c.objects.recordWrite(created)
			res.outcome, res.live = OutcomeCreated, created
		}
		return res
	}

	owner := workOf(live)
	if owner != workKey(work) {
		if work.Spec.ConflictResolution != policyv1alpha1.ConflictOverwrite {
			res.outcome = OutcomeConflict
			if owner != "" {
				res.err = fmt.Errorf("%s %s is managed by Work %s", desired.GetKind(), displayName(desired), owner)
			} else {
				res.err = fmt.Errorf("%s %s exists and is not managed by Flotilla (set conflictResolution: Overwrite to adopt it)", desired.GetKind(), displayName(desired))
			}
			return res
		}
	} else if strategy == workv1alpha1.ApplyStrategyCreateOnly {
		res.outcome = OutcomeUnchanged
		return res
	}
	// Only an object this Work created keeps the created mark; adopting
	// never adds it (Overwrite of another Work's object included).
	c.stamp(desired, work, hash, owner == workKey(work) && createdByFlotilla(live))
	// Fields a customization names as the member's (retention) keep their
	// live values: applying leaves them be and they are never drift.
	c.opts.Interpreter.RetainFields(desired, live)
	if live.GetAnnotations()[workv1alpha1.AnnotationManifestHash] == hash && isSubset(desired.Object, live.Object) {
		res.outcome = OutcomeUnchanged
		return res
	}
	if live.GetManagedFields() == nil {
		// A cached object (the cache strips managedFields): the upgrade
		// below needs them, so read the object afresh. Only writes pay
		// this GET; an unchanged object is decided from the cache alone.
		fresh, err := c.getLive(ctx, gvr, live.GetNamespace(), live.GetName())
		if err != nil {
			res.outcome, res.err = OutcomeFailed, err
			return res
		}
		if fresh == nil || fresh.GetUID() != live.GetUID() || workOf(fresh) != workOf(live) || createdByFlotilla(fresh) != createdByFlotilla(live) {
			// Changed since the decision: decide again on a fresh read.
			res.outcome, res.err = OutcomeFailed, errRaced
			return res
		}
		live = fresh
	}
	if err := c.upgradeManagedFields(ctx, client, live); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			err = fmt.Errorf("%w: %v", errRaced, err)
		}
		res.outcome, res.err = OutcomeFailed, err
		return res
	}
	// The UID we decided on is the precondition: an object deleted
	// meanwhile fails with a conflict, one re-created under the same name
	// fails validation (metadata.uid is immutable); neither is adopted.
	desired.SetUID(live.GetUID())
	data, err := json.Marshal(desired.Object)
	if err != nil {
		res.outcome, res.err = OutcomeInvalid, err
		return res
	}
	c.beforeWrite("apply", desired)
	applied, err := client.Patch(ctx, desired.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: c.opts.FieldManager, Force: ptr.To(true)})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || isUIDMismatch(err) {
			err = fmt.Errorf("%w: %v", errRaced, err)
			res.outcome, res.err = OutcomeFailed, err
			return res
		}
		res.outcome, res.err = applyOutcome(err), err
		return res
	}
	c.objects.recordWrite(applied)
	res.outcome, res.live = OutcomeApplied, applied
	return res
}

// upgradeManagedFields converts the "Update" managedFields entry that our
// Create left into an "Apply" entry of the same manager, once, before the
// first server-side apply: otherwise the fields set at creation stay owned
// by an Update entry, and a field later dropped from the manifest would never
// be removed. The patch carries the live resourceVersion, so it fails (and
// the sync retries) if the object changed since it was read.
func (c *Controller) upgradeManagedFields(ctx context.Context, client dynamic.ResourceInterface, live *unstructured.Unstructured) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(c.opts.FieldManager), c.opts.FieldManager)
	if err != nil || patch == nil {
		return err
	}
	c.beforeWrite("upgrade-managed-fields", live)
	// The resourceVersion in the patch is also the identity check: a
	// re-created object has another one.
	upgraded, err := client.Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	if err == nil {
		c.objects.recordWrite(upgraded)
	}
	return err
}

// isUIDMismatch reports the apiserver's refusal of a write whose
// metadata.uid is not the live object's.
func isUIDMismatch(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		return false
	}
	if d := status.Status().Details; d != nil {
		for _, cause := range d.Causes {
			if cause.Field == "metadata.uid" {
				return true
			}
		}
	}
	return false
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

// get reads the member object, from the informer cache when it can. The
// answer may be stale: every write made on it carries a precondition.
func (c *Controller) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if obj, exists, ok := c.objects.cached(ctx, gvr, namespace, name); ok {
		if exists {
			return obj, nil
		}
		// The cache only holds managed objects: ask the metadata cache
		// whether anything of that name exists before paying a GET.
		if exists, known := c.objects.exists(ctx, gvr, namespace, name); known && !exists {
			return nil, nil
		}
	}
	return c.getLive(ctx, gvr, namespace, name)
}

// getLive reads the member object from the apiserver; nil when absent.
func (c *Controller) getLive(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	obj, err := c.member.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// stripMarks removes Flotilla's own label and annotations from a manifest:
// only the agent sets them (a manifest claiming "created by Flotilla" would
// get an adopted object deleted later).
func stripMarks(obj *unstructured.Unstructured) {
	if labels := obj.GetLabels(); labels != nil {
		delete(labels, workv1alpha1.LabelManaged)
		delete(labels, LabelAutoCreatedNamespace)
		obj.SetLabels(labels)
	}
	if annotations := obj.GetAnnotations(); annotations != nil {
		for _, k := range markAnnotations {
			delete(annotations, k)
		}
		obj.SetAnnotations(annotations)
	}
}

// markAnnotations are the annotations that tie a member object to a Work.
var markAnnotations = []string{workv1alpha1.AnnotationWorkNamespace, workv1alpha1.AnnotationWorkName,
	workv1alpha1.AnnotationManifestHash, AnnotationCreatedByFlotilla}

// stamp adds Flotilla's label and annotations to a desired object; created
// adds the created-by-Flotilla mark (on Create, and kept on every later apply
// of an object this Work created, as an apply that omitted it would remove it).
func (c *Controller) stamp(obj *unstructured.Unstructured, work *workv1alpha1.Work, hash string, created bool) {
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
	if created {
		annotations[AnnotationCreatedByFlotilla] = "true"
	}
	obj.SetAnnotations(annotations)
	// Fields a manifest must not carry into a write.
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetManagedFields(nil)
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetDeletionTimestamp(nil)
	obj.SetGeneration(0)
	unstructured.RemoveNestedField(obj.Object, "status")
}

func createdByFlotilla(obj *unstructured.Unstructured) bool {
	return obj.GetAnnotations()[AnnotationCreatedByFlotilla] == "true"
}

// ensureNamespace creates a missing namespace with the auto-created label
// only: no Work owns it, so it is never deleted or released (it may hold
// other Works' objects and users' objects).
func (c *Controller) ensureNamespace(ctx context.Context, name string) error {
	if _, ok := c.namespaces.Load(name); ok {
		return nil
	}
	_, err := c.memberKube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelAutoCreatedNamespace: "true"}}}
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
