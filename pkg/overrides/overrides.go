/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package overrides applies ClusterOverridePolicies and OverridePolicies to
// a workload's manifest for one member cluster (Karmada semantics), and
// records which overriders were applied so the Work can say why its
// manifest differs from the template.
package overrides

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusteraffinity"
)

// AnnotationAppliedOverrides is the Work annotation holding the JSON of the
// AppliedOverrides used to build its manifest.
const AnnotationAppliedOverrides = "policy.flotilla.io/applied-overrides"

// PolicyOverriders is what one policy changed.
type PolicyOverriders struct {
	PolicyName string                    `json:"policyName"`
	Overriders policyv1alpha1.Overriders `json:"overriders"`
}

// AppliedOverrides records the overriders applied to one cluster's manifest
// (serialized as JSON into the Work annotation).
type AppliedOverrides struct {
	ClusterOverridePolicies []PolicyOverriders `json:"clusterOverridePolicies,omitempty"`
	OverridePolicies        []PolicyOverriders `json:"overridePolicies,omitempty"`
}

// policyRef is the part of either policy kind Apply needs, so both kinds
// share one code path.
type policyRef struct {
	name    string // recorded in PolicyOverriders
	errName string // "ClusterOverridePolicy x" or "OverridePolicy ns/x"
	spec    *policyv1alpha1.OverrideSpec
}

// Apply changes obj in place for cluster. ClusterOverridePolicies are
// applied first, then the OverridePolicies of obj's namespace, each kind in
// name order, so a later policy sees (and may override) an earlier one's
// result. It returns nil (and nil error) when no overrider applied. On error
// obj is left unchanged: the overriders run on a copy that is only swapped
// in on success, so a half-applied manifest can never be dispatched.
func Apply(obj *unstructured.Unstructured, cluster *clusterv1alpha1.Cluster, clusterPolicies []*policyv1alpha1.ClusterOverridePolicy, policies []*policyv1alpha1.OverridePolicy) (*AppliedOverrides, error) {
	if obj == nil {
		return nil, nil
	}
	if cluster == nil {
		// clusteraffinity.Matches dereferences the cluster; an unnamed
		// cluster matches only name-agnostic affinities.
		cluster = &clusterv1alpha1.Cluster{}
	}

	cps := slices.DeleteFunc(slices.Clone(clusterPolicies), func(p *policyv1alpha1.ClusterOverridePolicy) bool { return p == nil })
	slices.SortFunc(cps, func(a, b *policyv1alpha1.ClusterOverridePolicy) int { return cmp.Compare(a.Name, b.Name) })
	ops := slices.DeleteFunc(slices.Clone(policies), func(p *policyv1alpha1.OverridePolicy) bool {
		return p == nil || p.Namespace != obj.GetNamespace()
	})
	slices.SortFunc(ops, func(a, b *policyv1alpha1.OverridePolicy) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace))
	})

	var working map[string]interface{}
	var result AppliedOverrides
	run := func(p policyRef) ([]PolicyOverriders, error) {
		if !policySelects(p.spec, obj) {
			return nil, nil
		}
		var applied policyv1alpha1.Overriders
		for i := range p.spec.OverrideRules {
			rule := &p.spec.OverrideRules[i]
			if !clusteraffinity.Matches(rule.TargetCluster, cluster) {
				continue
			}
			if working == nil {
				working = deepCopyJSON(obj.Object).(map[string]interface{})
				if working == nil {
					working = map[string]interface{}{}
				}
			}
			var err error
			if working, err = applyOverriders(working, obj.GetKind(), &rule.Overriders, &applied); err != nil {
				return nil, fmt.Errorf("%s: %w", p.errName, err)
			}
		}
		if isEmpty(&applied) {
			return nil, nil
		}
		return []PolicyOverriders{{PolicyName: p.name, Overriders: applied}}, nil
	}

	for _, p := range cps {
		rec, err := run(policyRef{name: p.Name, errName: "ClusterOverridePolicy " + p.Name, spec: &p.Spec})
		if err != nil {
			return nil, err
		}
		result.ClusterOverridePolicies = append(result.ClusterOverridePolicies, rec...)
	}
	for _, p := range ops {
		rec, err := run(policyRef{name: p.Name, errName: "OverridePolicy " + p.Namespace + "/" + p.Name, spec: &p.Spec})
		if err != nil {
			return nil, err
		}
		result.OverridePolicies = append(result.OverridePolicies, rec...)
	}

	if len(result.ClusterOverridePolicies) == 0 && len(result.OverridePolicies) == 0 {
		// Unrecorded overriders never change the object, so obj is exact.
		return nil, nil
	}
	obj.Object = working
	return &result, nil
}

// SelectorMatches reports whether sel selects obj: apiVersion and kind
// equal; namespace equal if sel.Namespace is set; name equal if sel.Name is
// set (then the LabelSelector is ignored); otherwise the LabelSelector (if
// set) matches obj's labels. An invalid selector matches nothing, so a
// broken policy never overrides more than intended.
func SelectorMatches(sel policyv1alpha1.ResourceSelector, obj *unstructured.Unstructured) bool {
	if obj == nil || sel.APIVersion != obj.GetAPIVersion() || sel.Kind != obj.GetKind() {
		return false
	}
	if sel.Namespace != "" && sel.Namespace != obj.GetNamespace() {
		return false
	}
	if sel.Name != "" {
		return sel.Name == obj.GetName()
	}
	if sel.LabelSelector == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel.LabelSelector)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(obj.GetLabels()))
}

// policySelects reports whether a policy's selectors pick obj; no selectors
// pick everything the policy can see.
func policySelects(spec *policyv1alpha1.OverrideSpec, obj *unstructured.Unstructured) bool {
	if len(spec.ResourceSelectors) == 0 {
		return true
	}
	return slices.ContainsFunc(spec.ResourceSelectors, func(s policyv1alpha1.ResourceSelector) bool {
		return SelectorMatches(s, obj)
	})
}

func isEmpty(o *policyv1alpha1.Overriders) bool {
	return len(o.Plaintext) == 0 && len(o.ImageOverrider) == 0 && len(o.CommandOverrider) == 0 &&
		len(o.ArgsOverrider) == 0 && len(o.LabelsOverrider) == 0 && len(o.AnnotationsOverrider) == 0 &&
		len(o.FieldOverrider) == 0
}

// applyOverriders runs one rule's overriders on doc in the documented order
// and appends copies of those that took effect to applied. It returns the
// (possibly replaced, for plaintext) document.
func applyOverriders(doc map[string]interface{}, kind string, o *policyv1alpha1.Overriders, applied *policyv1alpha1.Overriders) (map[string]interface{}, error) {
	for i := range o.ImageOverrider {
		io := &o.ImageOverrider[i]
		ok, err := applyImage(doc, kind, io)
		if err != nil {
			return nil, fmt.Errorf("imageOverrider %s %s %s: %w", io.Component, io.Operator, predicatePath(io), err)
		}
		if ok {
			applied.ImageOverrider = append(applied.ImageOverrider, *io.DeepCopy())
		}
	}
	for i := range o.CommandOverrider {
		c := &o.CommandOverrider[i]
		ok, err := applyCommandArgs(doc, kind, "command", c)
		if err != nil {
			return nil, fmt.Errorf("commandOverrider %s %s: %w", c.ContainerName, c.Operator, err)
		}
		if ok {
			applied.CommandOverrider = append(applied.CommandOverrider, *c.DeepCopy())
		}
	}
	for i := range o.ArgsOverrider {
		c := &o.ArgsOverrider[i]
		ok, err := applyCommandArgs(doc, kind, "args", c)
		if err != nil {
			return nil, fmt.Errorf("argsOverrider %s %s: %w", c.ContainerName, c.Operator, err)
		}
		if ok {
			applied.ArgsOverrider = append(applied.ArgsOverrider, *c.DeepCopy())
		}
	}
	for i := range o.LabelsOverrider {
		l := &o.LabelsOverrider[i]
		ok, err := applyStringMap(doc, "labels", l)
		if err != nil {
			return nil, fmt.Errorf("labelsOverrider %s: %w", l.Operator, err)
		}
		if ok {
			applied.LabelsOverrider = append(applied.LabelsOverrider, *l.DeepCopy())
		}
	}
	for i := range o.AnnotationsOverrider {
		l := &o.AnnotationsOverrider[i]
		ok, err := applyStringMap(doc, "annotations", l)
		if err != nil {
			return nil, fmt.Errorf("annotationsOverrider %s: %w", l.Operator, err)
		}
		if ok {
			applied.AnnotationsOverrider = append(applied.AnnotationsOverrider, *l.DeepCopy())
		}
	}
	for i := range o.FieldOverrider {
		f := &o.FieldOverrider[i]
		if err := applyField(doc, f); err != nil {
			return nil, fmt.Errorf("fieldOverrider %s: %w", fieldOverriderName(f), err)
		}
		applied.FieldOverrider = append(applied.FieldOverrider, *f.DeepCopy())
	}
	for i := range o.Plaintext {
		p := &o.Plaintext[i]
		patched, err := applyPlaintext(doc, p)
		if err != nil {
			return nil, fmt.Errorf("plaintext %s %s: %w", p.Operator, p.Path, err)
		}
		doc = patched
		applied.Plaintext = append(applied.Plaintext, *p.DeepCopy())
	}
	return doc, nil
}

func predicatePath(io *policyv1alpha1.ImageOverrider) string {
	if io.Predicate == nil {
		return "(all containers)"
	}
	return io.Predicate.Path
}

// --- plaintext ---

// jsonPatchOp is one RFC 6902 operation; Value is omitted for remove.
type jsonPatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// applyPlaintext applies one JSON-patch operation. Each operation is its own
// patch so an error can name the failing path.
func applyPlaintext(doc map[string]interface{}, p *policyv1alpha1.PlaintextOverrider) (map[string]interface{}, error) {
	op := jsonPatchOp{Op: string(p.Operator), Path: p.Path}
	switch p.Operator {
	case policyv1alpha1.OverriderOpAdd, policyv1alpha1.OverriderOpReplace:
		op.Value = json.RawMessage("null") // an unset value means JSON null
		if len(p.Value.Raw) > 0 {
			if !json.Valid(p.Value.Raw) {
				return nil, errors.New("value is not valid JSON")
			}
			op.Value = json.RawMessage(p.Value.Raw)
		}
	case policyv1alpha1.OverriderOpRemove:
	default:
		return nil, fmt.Errorf("unknown operator %q", p.Operator)
	}
	patchJSON, err := json.Marshal([]jsonPatchOp{op})
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return nil, err
	}
	docJSON, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	patched, err := patch.Apply(docJSON)
	if err != nil {
		return nil, err
	}
	// utiljson keeps integers as int64, as unstructured expects.
	var out map[string]interface{}
	if err := utiljson.Unmarshal(patched, &out); err != nil {
		return nil, fmt.Errorf("patched object: %w", err)
	}
	if out == nil {
		return nil, errors.New("patched object is not a JSON object")
	}
	return out, nil
}

// --- pod spec helpers ---

// podSpecPaths locates the pod spec of the kinds whose containers the
// predicate-less image overrider and the command/args overriders change.
var podSpecPaths = map[string][]string{
	"Pod":         {"spec"},
	"Deployment":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
}

// containers returns the container maps of doc's pod spec (containers, then
// initContainers). Malformed parts are skipped: they hold nothing to change.
func containers(doc map[string]interface{}, kind string) []map[string]interface{} {
	path, ok := podSpecPaths[kind]
	if !ok {
		return nil
	}
	spec, found, err := unstructured.NestedFieldNoCopy(doc, path...)
	specMap, isMap := spec.(map[string]interface{})
	if !found || err != nil || !isMap {
		return nil
	}
	var out []map[string]interface{}
	for _, field := range []string{"containers", "initContainers"} {
		list, _ := specMap[field].([]interface{})
		for _, c := range list {
			if m, ok := c.(map[string]interface{}); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// --- image ---

// applyImage reports whether any image was found to change.
func applyImage(doc map[string]interface{}, kind string, io *policyv1alpha1.ImageOverrider) (bool, error) {
	if io.Predicate != nil {
		return true, updateStringAtPointer(doc, io.Predicate.Path, func(image string) (string, error) {
			return overrideImage(image, io)
		})
	}
	found := false
	for _, c := range containers(doc, kind) {
		image, ok := c["image"].(string)
		if !ok {
			continue
		}
		newImage, err := overrideImage(image, io)
		if err != nil {
			return false, err
		}
		c["image"] = newImage
		found = true
	}
	return found, nil
}

// imageRef is a container image reference split the docker way. tag holds
// everything after the repository (a tag, a digest, or "tag@digest"); sep is
// the character that precedes it, ':' or '@'.
type imageRef struct {
	registry, repository, tag string
	sep                       byte
}

// parseImage splits an image reference. It never fails: Flotilla changes
// the text, and the member's kubelet judges its validity.
func parseImage(image string) imageRef {
	var ref imageRef
	name := image
	if i := strings.IndexByte(name, '/'); i >= 0 {
		first := name[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			ref.registry, name = first, name[i+1:]
		}
	}
	// The tag part starts at the last ':' after the last '/' of the name
	// before any digest, so "app:v1@sha256:..." keeps "v1@sha256:..." as
	// its tag part; a bare digest starts at '@'.
	end := strings.IndexByte(name, '@')
	base := name
	if end >= 0 {
		base = name[:end]
	}
	if colon := strings.LastIndexByte(base, ':'); colon > strings.LastIndexByte(base, '/') {
		end = colon
	}
	if end >= 0 {
		ref.repository, ref.sep, ref.tag = name[:end], name[end], name[end+1:]
	} else {
		ref.repository = name
	}
	return ref
}

// String recomposes the reference, omitting empty parts.
func (r imageRef) String() string {
	var b strings.Builder
	b.WriteString(r.registry)
	if r.registry != "" && r.repository != "" {
		b.WriteByte('/')
	}
	b.WriteString(r.repository)
	if r.tag != "" {
		sep := r.sep
		if sep == 0 {
			sep = ':'
		}
		b.WriteByte(sep)
		b.WriteString(r.tag)
	}
	return b.String()
}

// tagSeparator picks the separator for a new tag part: a bare digest
// ("sha256:...") follows '@', a tag (or "tag@digest") follows ':'.
func tagSeparator(tag string) byte {
	if strings.Contains(tag, ":") && !strings.Contains(tag, "@") {
		return '@'
	}
	return ':'
}

func overrideImage(image string, io *policyv1alpha1.ImageOverrider) (string, error) {
	ref := parseImage(image)
	var part *string
	switch io.Component {
	case policyv1alpha1.Registry:
		part = &ref.registry
	case policyv1alpha1.Repository:
		part = &ref.repository
	case policyv1alpha1.Tag:
		part = &ref.tag
	default:
		return "", fmt.Errorf("unknown image component %q", io.Component)
	}
	switch io.Operator {
	case policyv1alpha1.OverriderOpAdd:
		// Appending to a registry is how a registry suffix (e.g. a
		// mirror's "-cn") is expressed; an empty one is simply set.
		*part += io.Value
	case policyv1alpha1.OverriderOpReplace:
		*part = io.Value
	case policyv1alpha1.OverriderOpRemove:
		*part = ""
	default:
		return "", fmt.Errorf("unknown operator %q", io.Operator)
	}
	if io.Component == policyv1alpha1.Tag {
		ref.sep = tagSeparator(ref.tag)
	}
	return ref.String(), nil
}

// updateStringAtPointer replaces the string at the RFC 6901 JSON pointer
// with fn's result. Anything but an existing string there is an error: a
// predicate that points elsewhere is a broken policy, not a no-op.
func updateStringAtPointer(doc map[string]interface{}, pointer string, fn func(string) (string, error)) error {
	if !strings.HasPrefix(pointer, "/") {
		return errors.New("path must start with /")
	}
	tokens := strings.Split(pointer[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	var cur interface{} = doc
	for _, t := range tokens[:len(tokens)-1] {
		next, err := child(cur, t)
		if err != nil {
			return err
		}
		cur = next
	}
	last := tokens[len(tokens)-1]
	old, err := child(cur, last)
	if err != nil {
		return err
	}
	s, ok := old.(string)
	if !ok {
		return fmt.Errorf("path is a %T, not a string", old)
	}
	s, err = fn(s)
	if err != nil {
		return err
	}
	switch c := cur.(type) {
	case map[string]interface{}:
		c[last] = s
	case []interface{}:
		idx, _ := arrayIndex(last, len(c)) // validated by child above
		c[idx] = s
	}
	return nil
}

// child returns the value at one pointer token below cur.
func child(cur interface{}, token string) (interface{}, error) {
	switch c := cur.(type) {
	case map[string]interface{}:
		v, ok := c[token]
		if !ok {
			return nil, fmt.Errorf("no field %q", token)
		}
		return v, nil
	case []interface{}:
		idx, err := arrayIndex(token, len(c))
		if err != nil {
			return nil, err
		}
		return c[idx], nil
	default:
		return nil, fmt.Errorf("cannot index a %T with %q", cur, token)
	}
}

func arrayIndex(token string, n int) (int, error) {
	idx, err := strconv.Atoi(token)
	if err != nil || idx < 0 || idx >= n || (len(token) > 1 && token[0] == '0') || token[0] == '+' {
		return 0, fmt.Errorf("invalid array index %q for length %d", token, n)
	}
	return idx, nil
}

// --- command / args ---

// applyCommandArgs changes field ("command" or "args") of the named
// container; it reports whether the container exists.
func applyCommandArgs(doc map[string]interface{}, kind, field string, c *policyv1alpha1.CommandArgsOverrider) (bool, error) {
	switch c.Operator {
	case policyv1alpha1.OverriderOpAdd, policyv1alpha1.OverriderOpRemove:
	default:
		return false, fmt.Errorf("unknown operator %q", c.Operator)
	}
	found := false
	for _, ctr := range containers(doc, kind) {
		if name, _ := ctr["name"].(string); name != c.ContainerName {
			continue
		}
		found = true
		var items []interface{}
		switch cur := ctr[field].(type) {
		case nil:
		case []interface{}:
			items = cur
		case []string: // typed slices can appear in objects built in code
			for _, s := range cur {
				items = append(items, s)
			}
		default:
			return false, fmt.Errorf("%s is a %T, not a list", field, cur)
		}
		// Always build a new slice: the old one may be shared with the
		// caller's object until the result is swapped in.
		out := make([]interface{}, 0, len(items)+len(c.Value))
		for _, it := range items {
			if s, ok := it.(string); ok && c.Operator == policyv1alpha1.OverriderOpRemove && slices.Contains(c.Value, s) {
				continue
			}
			out = append(out, it)
		}
		if c.Operator == policyv1alpha1.OverriderOpAdd {
			for _, v := range c.Value {
				out = append(out, v)
			}
		}
		ctr[field] = out
	}
	return found, nil
}

// --- labels / annotations ---

// applyStringMap changes metadata.<field>. It reports whether the overrider
// touched a key: add with values always does; replace and remove only when a
// named key exists.
func applyStringMap(doc map[string]interface{}, field string, l *policyv1alpha1.LabelAnnotationOverrider) (bool, error) {
	switch l.Operator {
	case policyv1alpha1.OverriderOpAdd, policyv1alpha1.OverriderOpReplace, policyv1alpha1.OverriderOpRemove:
	default:
		return false, fmt.Errorf("unknown operator %q", l.Operator)
	}
	if len(l.Value) == 0 {
		return false, nil
	}
	var meta map[string]interface{}
	switch m := doc["metadata"].(type) {
	case nil:
		if l.Operator != policyv1alpha1.OverriderOpAdd {
			return false, nil
		}
		meta = map[string]interface{}{}
		doc["metadata"] = meta
	case map[string]interface{}:
		meta = m
	default:
		return false, fmt.Errorf("metadata is a %T, not an object", m)
	}
	var values map[string]interface{}
	switch m := meta[field].(type) {
	case nil:
		if l.Operator != policyv1alpha1.OverriderOpAdd {
			return false, nil
		}
		values = map[string]interface{}{}
		meta[field] = values
	case map[string]interface{}:
		values = m
	case map[string]string: // typed maps can appear in objects built in code
		values = make(map[string]interface{}, len(m))
		for k, v := range m {
			values[k] = v
		}
		meta[field] = values
	default:
		return false, fmt.Errorf("metadata.%s is a %T, not an object", field, m)
	}

	touched := false
	for k, v := range l.Value {
		_, exists := values[k]
		switch {
		case l.Operator == policyv1alpha1.OverriderOpAdd:
			values[k] = v
			touched = true
		case l.Operator == policyv1alpha1.OverriderOpReplace && exists:
			values[k] = v
			touched = true
		case l.Operator == policyv1alpha1.OverriderOpRemove && exists:
			delete(values, k)
			touched = true
		}
	}
	if touched && len(values) == 0 {
		delete(meta, field) // keep manifests free of empty maps
	}
	return touched, nil
}

// --- copying ---

// deepCopyJSON copies the maps and slices of an unstructured value. Unlike
// runtime.DeepCopyJSONValue it never panics on unexpected types: those are
// leaves the overriders only read or replace, never mutate.
func deepCopyJSON(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		if x == nil {
			return map[string]interface{}(nil)
		}
		out := make(map[string]interface{}, len(x))
		for k, e := range x {
			out[k] = deepCopyJSON(e)
		}
		return out
	case []interface{}:
		if x == nil {
			return []interface{}(nil)
		}
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = deepCopyJSON(e)
		}
		return out
	default:
		return v
	}
}
