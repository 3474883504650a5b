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

package ingress

import (
	"encoding/json"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Which workloads a backend Service fronts is read from the templates on
// the hub: a Service template's spec.selector against the pod template
// labels (spec.template.metadata.labels) of the Deployment, StatefulSet,
// DaemonSet and ReplicaSet templates of the same namespace. Two indexes on
// the ResourceTemplate informer make both directions a lookup: workload
// templates by each pod label, Service templates by each selector label.
// Keys carry the template's namespace, so a tenant's Service never
// selects another namespace's workload.
const (
	podLabelIndex        = "flotilla.io/ingress-pod-label"
	serviceSelectorIndex = "flotilla.io/ingress-service-selector"
)

// workloadKinds are the apps/v1 kinds whose pods a Service selects through
// their pod template.
var workloadKinds = []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}

// templateShape is the part of a template's manifest the matching reads;
// decoding only it keeps the index functions cheap.
type templateShape struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		// A Service's map, a workload's LabelSelector: decoded per kind.
		Selector json.RawMessage `json:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"template"`
	} `json:"spec"`
}

// shapeOf decodes tmpl's manifest; false when it does not decode or names
// another namespace (the admission policy refuses that; the matching does
// not rely on it).
func shapeOf(tmpl *workv1alpha1.ResourceTemplate) (templateShape, bool) {
	var s templateShape
	if tmpl == nil || tmpl.Namespace == "" || len(tmpl.Spec.Manifest.Raw) == 0 || json.Unmarshal(tmpl.Spec.Manifest.Raw, &s) != nil {
		return s, false
	}
	if s.Metadata.Namespace != "" && s.Metadata.Namespace != tmpl.Namespace {
		return s, false
	}
	return s, true
}

// PodTemplateLabels returns the pod template labels of a Deployment,
// StatefulSet, DaemonSet or ReplicaSet template; false for other kinds.
func PodTemplateLabels(tmpl *workv1alpha1.ResourceTemplate) (map[string]string, bool) {
	s, ok := shapeOf(tmpl)
	if !ok || !isWorkload(s.APIVersion, s.Kind) {
		return nil, false
	}
	return s.Spec.Template.Metadata.Labels, true
}

func isWorkload(apiVersion, kind string) bool {
	return strings.HasPrefix(apiVersion, "apps/") && slices.Contains(workloadKinds, kind)
}

// ServiceSelector returns a Service template's Service name and
// spec.selector; false for other kinds, and for a Service without selector
// (its endpoints are managed by hand: it fronts no workload).
func ServiceSelector(tmpl *workv1alpha1.ResourceTemplate) (string, map[string]string, bool) {
	s, ok := shapeOf(tmpl)
	if !ok || s.APIVersion != "v1" || s.Kind != kindService {
		return "", nil, false
	}
	var sel map[string]string
	if len(s.Spec.Selector) == 0 || json.Unmarshal(s.Spec.Selector, &sel) != nil || len(sel) == 0 {
		return s.Metadata.Name, nil, false
	}
	return s.Metadata.Name, sel, true
}

// Selects says whether a Service selector selects pods labelled labels.
// An empty selector selects nothing (a Service without selector).
func Selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func labelKey(namespace, k, v string) string {
	return namespace + "/" + k + "=" + v // a namespace has no "/", a label key no "="
}

func labelKeys(namespace string, labels map[string]string) []string {
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		keys = append(keys, labelKey(namespace, k, v))
	}
	return keys
}

// podLabelIndexFunc indexes workload templates by each pod template label.
func podLabelIndexFunc(obj any) ([]string, error) {
	tmpl, ok := obj.(*workv1alpha1.ResourceTemplate)
	if !ok {
		return nil, nil
	}
	labels, ok := PodTemplateLabels(tmpl)
	if !ok {
		return nil, nil
	}
	return labelKeys(tmpl.Namespace, labels), nil
}

// serviceSelectorIndexFunc indexes Service templates by each selector label.
func serviceSelectorIndexFunc(obj any) ([]string, error) {
	tmpl, ok := obj.(*workv1alpha1.ResourceTemplate)
	if !ok {
		return nil, nil
	}
	_, sel, ok := ServiceSelector(tmpl)
	if !ok {
		return nil, nil
	}
	return labelKeys(tmpl.Namespace, sel), nil
}

// SelectedWorkloadTemplates returns the workload templates of namespace
// whose pods selector selects, from templates (indexed by podLabelIndex).
func SelectedWorkloadTemplates(templates cache.Indexer, namespace string, selector map[string]string) []*workv1alpha1.ResourceTemplate {
	if len(selector) == 0 {
		return nil
	}
	// Every selected template carries every selector label: read the
	// candidates under the rarest one (decoding each is the cost).
	best, fewest := "", -1
	for k, v := range selector {
		key := labelKey(namespace, k, v)
		keys, _ := templates.IndexKeys(podLabelIndex, key)
		if fewest < 0 || len(keys) < fewest || len(keys) == fewest && key < best {
			best, fewest = key, len(keys)
		}
	}
	if fewest == 0 {
		return nil
	}
	objs, _ := templates.ByIndex(podLabelIndex, best)
	var out []*workv1alpha1.ResourceTemplate
	for _, o := range objs {
		tmpl, ok := o.(*workv1alpha1.ResourceTemplate)
		if !ok || tmpl.Namespace != namespace || tmpl.DeletionTimestamp != nil {
			continue
		}
		if labels, ok := PodTemplateLabels(tmpl); ok && Selects(selector, labels) {
			out = append(out, tmpl)
		}
	}
	slices.SortFunc(out, func(a, b *workv1alpha1.ResourceTemplate) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SelectingServices returns the names of the Services (from the Service
// templates of namespace, indexed by serviceSelectorIndex) whose selector
// selects pods labelled labels.
func SelectingServices(templates cache.Indexer, namespace string, labels map[string]string) []string {
	var names []string
	for k, v := range labels {
		objs, _ := templates.ByIndex(serviceSelectorIndex, labelKey(namespace, k, v))
		for _, o := range objs {
			tmpl, ok := o.(*workv1alpha1.ResourceTemplate)
			if !ok || tmpl.Namespace != namespace {
				continue
			}
			if name, sel, ok := ServiceSelector(tmpl); ok && Selects(sel, labels) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// WorkloadBindings returns, for each backend Service that has bindings,
// the bindings of the workloads its templates' selectors select: the
// workload templates of the ingress's namespace (templates, indexed by
// podLabelIndex) and their bindings (bindings, indexed by
// workobjects.OwnerTemplateIndex). Only bindings a template of the same
// namespace controls count, so no other tenant's workload is ever read.
func WorkloadBindings(templates, bindings cache.Indexer, namespace string, services map[string][]*workv1alpha1.ResourceBinding) map[string][]*workv1alpha1.ResourceBinding {
	out := map[string][]*workv1alpha1.ResourceBinding{}
	for svc, rbs := range services {
		seen := map[string]bool{}
		for _, rb := range rbs {
			tmpl := controllingTemplate(templates, rb)
			if tmpl == nil {
				continue
			}
			name, sel, ok := ServiceSelector(tmpl)
			if !ok || name != svc {
				continue
			}
			for _, wt := range SelectedWorkloadTemplates(templates, namespace, sel) {
				objs, _ := bindings.ByIndex(workobjects.OwnerTemplateIndex, namespace+"/"+wt.Name)
				for _, o := range objs {
					wb, ok := o.(*workv1alpha1.ResourceBinding)
					if !ok || wb.Namespace != namespace || wb.DeletionTimestamp != nil || seen[wb.Name] || !controlledBy(wb, wt) {
						continue
					}
					seen[wb.Name] = true
					out[svc] = append(out[svc], wb)
				}
			}
		}
		slices.SortFunc(out[svc], func(a, b *workv1alpha1.ResourceBinding) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// controllingTemplate returns the template of rb's namespace that controls
// rb, or nil.
func controllingTemplate(templates cache.Indexer, rb *workv1alpha1.ResourceBinding) *workv1alpha1.ResourceTemplate {
	ref := metav1.GetControllerOf(rb)
	if ref == nil || ref.Kind != "ResourceTemplate" || rb.Namespace == "" {
		return nil
	}
	obj, exists, _ := templates.GetByKey(rb.Namespace + "/" + ref.Name)
	if !exists {
		return nil
	}
	tmpl, ok := obj.(*workv1alpha1.ResourceTemplate)
	if !ok || tmpl.UID != ref.UID {
		return nil // a template re-created under the name does not control rb
	}
	return tmpl
}

func controlledBy(rb *workv1alpha1.ResourceBinding, tmpl *workv1alpha1.ResourceTemplate) bool {
	ref := metav1.GetControllerOf(rb)
	return ref != nil && ref.Kind == "ResourceTemplate" && ref.UID == tmpl.UID
}
