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

package detector

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// ReasonInvalidWorkloadAffinityLabel: the policy groups workloads by a
// label (placement.workloadAffinity) whose value on the template's object
// is not a label value; the message names the label. The existing binding
// is kept as it was.
const ReasonInvalidWorkloadAffinityLabel = "InvalidWorkloadAffinityLabel"

// workloadAffinityLabelError says a template's group label cannot name a
// group.
type workloadAffinityLabelError struct{ msg string }

func (e *workloadAffinityLabelError) Error() string { return e.msg }

// WorkloadAffinityGroups are the groups of the binding of obj, a template
// of namespace ns, under placement (Karmada's getWorkloadAffinityGroups):
// "<key>=<value>" for each term whose key the object's labels carry; nil
// when none does. A cluster-scoped template (ns "") is in no group, as in
// Karmada, whose ClusterResourceBindings carry none: a group is scoped by
// namespace, and a cluster-scoped object has none. The object's labels are
// the tenant's input, not checked by the CRD (the manifest is free-form):
// a value that is not a label value is refused here, so a group string is
// always at most MaxWorkloadAffinityGroupLength.
func WorkloadAffinityGroups(ns string, obj *unstructured.Unstructured, placement *policyv1alpha1.Placement) (*workv1alpha1.WorkloadAffinityGroups, error) {
	if ns == "" || placement == nil || placement.WorkloadAffinity == nil {
		return nil, nil
	}
	labels := obj.GetLabels()
	group := func(term, key string) (string, error) {
		if key == "" {
			return "", nil
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			// The CRD refuses it; a policy stored before it did is not used.
			return "", &workloadAffinityLabelError{msg: fmt.Sprintf("placement.workloadAffinity.%s.groupByLabelKey %q is not a label key: %s",
				term, statuslimits.Text(key, 64), strings.Join(errs, "; "))}
		}
		value, ok := labels[key]
		if !ok {
			return "", nil
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return "", &workloadAffinityLabelError{msg: fmt.Sprintf("the object's label %s (placement.workloadAffinity.%s.groupByLabelKey) has value %q, which is not a label value: %s",
				key, term, statuslimits.Text(value, 64), strings.Join(errs, "; "))}
		}
		return workv1alpha1.WorkloadAffinityGroup(key, value), nil
	}
	var out workv1alpha1.WorkloadAffinityGroups
	var err error
	if t := placement.WorkloadAffinity.Affinity; t != nil {
		if out.AffinityGroup, err = group("affinity", t.GroupByLabelKey); err != nil {
			return nil, err
		}
	}
	if t := placement.WorkloadAffinity.AntiAffinity; t != nil {
		if out.AntiAffinityGroup, err = group("antiAffinity", t.GroupByLabelKey); err != nil {
			return nil, err
		}
	}
	if out.AffinityGroup == "" && out.AntiAffinityGroup == "" {
		return nil, nil
	}
	return &out, nil
}
