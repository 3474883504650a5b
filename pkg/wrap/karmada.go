package wrap

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
	"github.com/flotilla-io/flotilla/pkg/overrides"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// karmadaVersion is the version of every Karmada kind Flotilla converts.
const karmadaVersion = "v1alpha1"

// karmadaTarget is the Flotilla kind a Karmada kind becomes.
type karmadaTarget struct {
	gvk        schema.GroupVersionKind
	namespaced bool
}

// karmadaKinds maps the Karmada kinds Flotilla has an equivalent of. Field
// names and JSON tags of these Flotilla types follow Karmada's, so the
// conversion is a group change plus dropping what Flotilla lacks.
var karmadaKinds = map[schema.GroupKind]karmadaTarget{
	{Group: "policy.karmada.io", Kind: "PropagationPolicy"}:        {policyv1alpha1.SchemeGroupVersion.WithKind("PropagationPolicy"), true},
	{Group: "policy.karmada.io", Kind: "ClusterPropagationPolicy"}: {policyv1alpha1.SchemeGroupVersion.WithKind("ClusterPropagationPolicy"), false},
	{Group: "policy.karmada.io", Kind: "OverridePolicy"}:           {policyv1alpha1.SchemeGroupVersion.WithKind("OverridePolicy"), true},
	{Group: "policy.karmada.io", Kind: "ClusterOverridePolicy"}:    {policyv1alpha1.SchemeGroupVersion.WithKind("ClusterOverridePolicy"), false},
	// Karmada keeps ClusterTaintPolicy in policy.karmada.io; Flotilla in
	// cluster.flotilla.io. cluster.karmada.io is accepted too, as people
	// guess it from the name.
	{Group: "policy.karmada.io", Kind: "ClusterTaintPolicy"}:      {clusterv1alpha1.SchemeGroupVersion.WithKind("ClusterTaintPolicy"), false},
	{Group: "cluster.karmada.io", Kind: "ClusterTaintPolicy"}:     {clusterv1alpha1.SchemeGroupVersion.WithKind("ClusterTaintPolicy"), false},
	{Group: "cluster.karmada.io", Kind: "Cluster"}:                {clusterv1alpha1.SchemeGroupVersion.WithKind("Cluster"), false},
	{Group: "remedy.karmada.io", Kind: "Remedy"}:                  {remedyv1alpha1.SchemeGroupVersion.WithKind("Remedy"), false},
	{Group: "networking.karmada.io", Kind: "MultiClusterIngress"}: {networkingv1alpha1.SchemeGroupVersion.WithKind("MultiClusterIngress"), true},
	// Its workloads name native objects (apiVersion, kind, namespace,
	// name); Flotilla's name a template's embedded object the same way, and
	// wrap keeps that object as it is, so the references stay valid.
	{Group: "apps.karmada.io", Kind: "WorkloadRebalancer"}: {appsv1alpha1.SchemeGroupVersion.WithKind("WorkloadRebalancer"), false},
}

// karmadaKeys maps Karmada's well-known label, annotation and taint keys to
// Flotilla's equivalents.
var karmadaKeys = map[string]string{
	"cluster.karmada.io/not-ready":             clusterv1alpha1.TaintClusterNotReady,
	"cluster.karmada.io/unreachable":           clusterv1alpha1.TaintClusterUnreachable,
	"karmada.io/managed":                       workv1alpha1.LabelManaged,
	"work.karmada.io/namespace":                workv1alpha1.AnnotationWorkNamespace,
	"work.karmada.io/name":                     workv1alpha1.AnnotationWorkName,
	"propagationpolicy.karmada.io/namespace":   workobjects.LabelPropagationPolicyNamespace,
	"propagationpolicy.karmada.io/name":        workobjects.LabelPropagationPolicyName,
	"clusterpropagationpolicy.karmada.io/name": workobjects.LabelClusterPropagationPolicyName,
	"policy.karmada.io/applied-overrides":      overrides.AnnotationAppliedOverrides,
}

// convertKarmada turns one Karmada object into its Flotilla equivalent, or
// returns nil (with a Finding) when Flotilla has no such kind. Fields
// Flotilla's types cannot hold are dropped and reported in res.Unsupported.
func convertKarmada(s sourced, opts Options, res *Result) (*unstructured.Unstructured, error) {
	defaultNamespace := opts.Namespace
	gvk := s.obj.GroupVersionKind()
	if gvk.GroupKind() == karmadaCustomizationKind && gvk.Version == karmadaVersion {
		return convertKarmadaCustomization(s, res)
	}
	target, ok := karmadaKinds[gvk.GroupKind()]
	if !ok || gvk.Version != karmadaVersion {
		msg := "kind not supported by Flotilla, not emitted"
		switch {
		case ok:
			msg = fmt.Sprintf("version %s not supported (Flotilla converts %s), not emitted", gvk.Version, karmadaVersion)
		case gvk.Group == "work.karmada.io":
			msg = "written by Karmada's controllers; the Flotilla hub makes its own, not emitted"
		}
		if hint, ok := unsupportedKindHints[gvk.GroupKind()]; ok && msg == "kind not supported by Flotilla, not emitted" {
			msg = "kind not supported by Flotilla (" + hint + "), not emitted"
		}
		res.Unsupported = append(res.Unsupported, Finding{
			Object:  describe(gvk.Kind, s.obj.GetNamespace(), s.obj.GetName()) + " (" + gvk.GroupVersion().String() + ")",
			Message: msg, Source: s.src})
		return nil, nil
	}

	obj := s.obj.DeepCopy()
	Strip(obj)
	obj.SetGroupVersionKind(target.gvk)
	if target.namespaced && obj.GetNamespace() == "" {
		// Set here, not left to kubectl's -n, so the policy lands in the
		// namespace of the templates wrapped with it.
		obj.SetNamespace(defaultNamespace)
	}
	if !target.namespaced && obj.GetNamespace() != "" {
		// Meaningless on a cluster-scoped object (the apiserver ignores
		// it), so a note rather than a finding.
		res.Notes = append(res.Notes, fmt.Sprintf("%s %s: cluster-scoped, metadata.namespace %q removed (%s)",
			gvk.Kind, obj.GetName(), obj.GetNamespace(), s.src))
		unstructured.RemoveNestedField(obj.Object, "metadata", "namespace")
	}
	desc := describe(gvk.Kind, obj.GetNamespace(), obj.GetName())

	if target.gvk.Kind == "OverridePolicy" || target.gvk.Kind == "ClusterOverridePolicy" {
		moveDeprecatedOverriders(obj.Object, desc, s.src, res)
	}
	isPropagationPolicy := target.gvk.Kind == "PropagationPolicy" || target.gvk.Kind == "ClusterPropagationPolicy"
	if isPropagationPolicy {
		prepareKarmadaPolicy(obj.Object, desc, s.src, res)
	}

	problems, err := dropUnsupported(obj.Object, target.gvk)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", s.src, desc, err)
	}
	for i := range problems {
		problems[i] = explainUnsupported(problems[i])
	}
	if isPropagationPolicy {
		problems = append(problems, checkStatePreservation(obj.Object)...)
		problems = append(problems, checkSchedulePriority(obj.Object)...)
	}
	if target.gvk.Kind == "OverridePolicy" || target.gvk.Kind == "ClusterOverridePolicy" {
		problems = append(problems, checkFieldOverriders(obj.Object, desc, s.src, res)...)
	}
	if target.gvk.Kind == "WorkloadRebalancer" {
		rebalancerNotes(obj.Object, desc, s.src, opts, res)
	}
	// Flotilla members are always pulled by their agent: Push is a value
	// the API refuses, not a field, so the strict decode above cannot see it.
	if target.gvk.Kind == "Cluster" {
		if mode, _, _ := unstructured.NestedString(obj.Object, "spec", "syncMode"); mode != "" && mode != string(clusterv1alpha1.Pull) {
			unstructured.RemoveNestedField(obj.Object, "spec", "syncMode")
			problems = append(problems, problem{"spec.syncMode", fmt.Sprintf("%s not supported by Flotilla (members run an agent: Pull), dropped", mode)})
		}
	}
	for _, p := range problems {
		res.Unsupported = append(res.Unsupported, Finding{Object: desc, Path: p.path, Message: p.message, Source: s.src})
	}
	rewriteKarmadaKeys(obj.Object, desc, res)
	noteKarmadaDifferences(obj.Object, target.gvk.Kind, desc, s.src, res)
	return obj, nil
}

// moveDeprecatedOverriders rewrites an OverridePolicy's top-level
// targetCluster and overriders (deprecated in Karmada, which still honours
// them when overrideRules is empty) into the one overrideRule they mean,
// as Karmada does. Flotilla only has overrideRules. With overrideRules set
// they are left for the strict check to report.
func moveDeprecatedOverriders(obj map[string]any, desc, src string, res *Result) {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return
	}
	target, hasTarget := spec["targetCluster"]
	overriders, hasOverriders := spec["overriders"]
	if !hasTarget && !hasOverriders {
		return
	}
	if rules, ok := spec["overrideRules"].([]any); ok && len(rules) > 0 {
		return
	}
	rule := map[string]any{"overriders": map[string]any{}}
	if hasTarget && target != nil {
		rule["targetCluster"] = target
	}
	if hasOverriders && overriders != nil {
		rule["overriders"] = overriders
	}
	delete(spec, "targetCluster")
	delete(spec, "overriders")
	spec["overrideRules"] = []any{rule}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: deprecated spec.targetCluster/spec.overriders moved into spec.overrideRules[0] (%s)", desc, src))
}

// problem is one field dropped by dropUnsupported.
type problem struct {
	path, message string
}

// dropUnsupported decodes obj strictly into the Go type of gvk and removes
// from obj every field the type rejects: unknown fields (what Flotilla does
// not implement) and fields of the wrong type (Karmada proposals that
// changed shape before release). What is left decodes cleanly.
func dropUnsupported(obj map[string]any, gvk schema.GroupVersionKind) ([]problem, error) {
	rejected, err := dropRejected(obj, func() (any, error) { return scheme.Scheme.New(gvk) })
	if err != nil {
		return nil, err
	}
	problems := make([]problem, 0, len(rejected))
	for _, r := range rejected {
		msg := "not supported by Flotilla, dropped"
		if r.typeError != "" {
			msg = fmt.Sprintf("wrong type for Flotilla (%s), dropped", r.typeError)
		}
		problems = append(problems, problem{r.path, msg})
	}
	return problems, nil
}

// rejectedField is a field dropRejected removed: unknown to the type, or
// (typeError set) of another type than the type's field.
type rejectedField struct {
	path, typeError string
}

// newTarget returns a new value of the Go type an object is decoded into.
type newTarget func() (any, error)

// dropRejected decodes obj strictly into the type newInto makes and removes
// from obj every field the type rejects, unknown or of the wrong type. What
// is left decodes cleanly. The work is bounded: at most 200 rounds, each
// dropping at least one field.
func dropRejected(obj map[string]any, newInto newTarget) ([]rejectedField, error) {
	var rejected []rejectedField
	// Each round drops at least one field, so the bound only guards
	// against a decoder that keeps failing on something we cannot drop.
	for range 200 {
		strictErrs, err := decodeStrict(obj, newInto)
		if err != nil {
			path := locateTypeError(obj, newInto, err.Error())
			if path == "" || !removePath(obj, path) {
				return nil, fmt.Errorf("cannot convert: %w", err)
			}
			rejected = append(rejected, rejectedField{path, typeErrorReason(err)})
			continue
		}
		if len(strictErrs) == 0 {
			return rejected, nil
		}
		for _, se := range strictErrs {
			fe, ok := se.(sigsjson.FieldError)
			if !ok || !removePath(obj, fe.FieldPath()) {
				return nil, fmt.Errorf("cannot convert: %w", se)
			}
			rejected = append(rejected, rejectedField{path: fe.FieldPath()})
		}
	}
	return nil, fmt.Errorf("cannot convert: too many unsupported fields")
}

func decodeStrict(obj map[string]any, newInto newTarget) ([]error, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	into, err := newInto()
	if err != nil {
		return nil, err
	}
	return sigsjson.UnmarshalStrict(data, into)
}

// typeErrorReason shortens encoding/json's "json: cannot unmarshal array
// into Go struct field PropagationPolicy.spec.failover of type
// v1alpha1.FailoverBehavior" to "array, want v1alpha1.FailoverBehavior".
func typeErrorReason(err error) string {
	msg := err.Error()
	value, rest, ok := strings.Cut(strings.TrimPrefix(msg, "json: cannot unmarshal "), " into ")
	if !ok {
		return msg
	}
	if _, typ, ok := strings.Cut(rest, " of type "); ok {
		return value + ", want " + typ
	}
	return msg
}

// locateTypeError finds the field behind a type error. encoding/json names
// the field without list indices, so the field is found by removing
// subtrees: descend into the first child whose removal changes the error,
// until no child does; that node is the culprit. It returns "" if even the
// root's children do not change it.
func locateTypeError(obj map[string]any, newInto newTarget, errMsg string) string {
	changes := func(path string) bool {
		trial := runtime.DeepCopyJSON(obj)
		if !removePath(trial, path) {
			return false
		}
		_, err := decodeStrict(trial, newInto)
		return err == nil || err.Error() != errMsg
	}
	path := ""
	var node any = obj
	for {
		next := ""
		var nextNode any
		switch n := node.(type) {
		case map[string]any:
			for _, k := range sortedKeys(n) {
				if p := joinKey(path, k); changes(p) {
					next, nextNode = p, n[k]
					break
				}
			}
		case []any:
			for i := range n {
				if p := path + "[" + strconv.Itoa(i) + "]"; changes(p) {
					next, nextNode = p, n[i]
					break
				}
			}
		}
		if next == "" {
			return path
		}
		path, node = next, nextNode
	}
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// removePath deletes the field at a JSON path as sigs.k8s.io/json writes
// them ("spec.overrideRules[0].foo"). A key may itself contain dots, so at
// each map the longest key that matches is taken.
func removePath(v any, path string) bool {
	switch n := v.(type) {
	case map[string]any:
		best := ""
		for k := range n {
			if strings.HasPrefix(path, k) && len(k) > len(best) {
				rest := path[len(k):]
				if rest == "" || rest[0] == '.' || rest[0] == '[' {
					best = k
				}
			}
		}
		if best == "" {
			return false
		}
		rest := path[len(best):]
		if rest == "" {
			delete(n, best)
			return true
		}
		if rest[0] == '.' {
			rest = rest[1:]
		}
		if l, ok := n[best].([]any); ok && rest != "" && rest[0] == '[' {
			idx, tail, ok := parseIndex(rest)
			if !ok || idx >= len(l) {
				return false
			}
			if tail == "" {
				n[best] = append(l[:idx:idx], l[idx+1:]...)
				return true
			}
			return removePath(l[idx], strings.TrimPrefix(tail, "."))
		}
		return removePath(n[best], rest)
	case []any:
		// Only reached for nested lists ("a[0][1]"), which no Flotilla type
		// has; handled for completeness.
		idx, tail, ok := parseIndex(path)
		if !ok || idx >= len(n) || tail == "" {
			return false
		}
		return removePath(n[idx], strings.TrimPrefix(tail, "."))
	}
	return false
}

func parseIndex(s string) (int, string, bool) {
	if !strings.HasPrefix(s, "[") {
		return 0, "", false
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return 0, "", false
	}
	i, err := strconv.Atoi(s[1:end])
	if err != nil || i < 0 {
		return 0, "", false
	}
	return i, s[end+1:], true
}

// keyMaps are the fields whose values are maps keyed by label or annotation
// keys; keyLists are lists whose items name a taint or label in "key".
var (
	keyMaps  = map[string]bool{"labels": true, "annotations": true, "matchLabels": true}
	keyLists = map[string]bool{"clusterTolerations": true, "tolerations": true, "taints": true, "matchExpressions": true}
	// overrider items carry the label or annotation map in "value".
	overriderLists = map[string]bool{"labelsOverrider": true, "annotationsOverrider": true}
)

// rewriteKarmadaKeys renames Karmada's label, annotation and taint keys
// that Flotilla has an equivalent of, wherever a key appears: metadata,
// label selectors, tolerations, taints, spreadByLabel and the labels and
// annotations overriders. Each rewrite is noted; other karmada.io keys are
// kept and noted, since Flotilla gives them no meaning.
func rewriteKarmadaKeys(obj map[string]any, desc string, res *Result) {
	note := func(path, from string) {
		if to, ok := karmadaKeys[from]; ok {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %s: %s rewritten to %s", desc, path, from, to))
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %s: %s has no Flotilla equivalent, kept", desc, path, from))
		}
	}
	renameKeys := func(m map[string]any, path string) {
		for _, k := range sortedKeys(m) {
			if !isKarmadaKey(k) {
				continue
			}
			note(path, k)
			if to, ok := karmadaKeys[k]; ok {
				m[to] = m[k]
				delete(m, k)
			}
		}
	}
	rewriteValue := func(m map[string]any, field, path string) {
		if s, ok := m[field].(string); ok && isKarmadaKey(s) {
			note(joinKey(path, field), s)
			if to, ok := karmadaKeys[s]; ok {
				m[field] = to
			}
		}
	}
	var walk func(v any, key, path string)
	walk = func(v any, key, path string) {
		switch n := v.(type) {
		case map[string]any:
			if keyMaps[key] {
				renameKeys(n, path)
				return
			}
			rewriteValue(n, "spreadByLabel", path)
			for _, k := range sortedKeys(n) {
				walk(n[k], k, joinKey(path, k))
			}
		case []any:
			for i, item := range n {
				p := fmt.Sprintf("%s[%d]", path, i)
				if m, ok := item.(map[string]any); ok {
					if keyLists[key] {
						rewriteValue(m, "key", p)
					}
					if overriderLists[key] {
						if vm, ok := m["value"].(map[string]any); ok {
							renameKeys(vm, p+".value")
						}
					}
				}
				walk(item, key, p)
			}
		}
	}
	walk(obj, "", "")
}

func isKarmadaKey(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	return ok && IsKarmadaGroup(prefix)
}
