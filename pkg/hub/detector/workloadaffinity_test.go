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
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestWorkloadAffinityGroups(t *testing.T) {
	obj := func(labels map[string]string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"}}}
		o.SetLabels(labels)
		return o
	}
	both := &policyv1alpha1.Placement{WorkloadAffinity: &policyv1alpha1.WorkloadAffinity{
		Affinity:     &policyv1alpha1.WorkloadAffinityTerm{GroupByLabelKey: "app.stack"},
		AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: "example.com/instance"}}}
	cases := []struct {
		name      string
		ns        string
		labels    map[string]string
		placement *policyv1alpha1.Placement
		want      *workv1alpha1.WorkloadAffinityGroups
		wantErr   string
	}{
		{name: "no workloadAffinity", ns: "a", labels: map[string]string{"app.stack": "shop"}, placement: &policyv1alpha1.Placement{}},
		{name: "both labels", ns: "a", labels: map[string]string{"app.stack": "shop", "example.com/instance": "1"}, placement: both,
			want: &workv1alpha1.WorkloadAffinityGroups{AffinityGroup: "app.stack=shop", AntiAffinityGroup: "example.com/instance=1"}},
		{name: "one label", ns: "a", labels: map[string]string{"example.com/instance": "1"}, placement: both,
			want: &workv1alpha1.WorkloadAffinityGroups{AntiAffinityGroup: "example.com/instance=1"}},
		{name: "an empty value is a group, as in Karmada", ns: "a", labels: map[string]string{"app.stack": ""}, placement: both,
			want: &workv1alpha1.WorkloadAffinityGroups{AffinityGroup: "app.stack="}},
		{name: "no label: no group", ns: "a", labels: map[string]string{"app": "web"}, placement: both},
		{name: "a cluster-scoped template is in no group", ns: "", labels: map[string]string{"app.stack": "shop"}, placement: both},
		// The manifest's labels are the tenant's and not checked by the
		// CRD: a value no label may have (too long, '=' in it) is refused,
		// so a group string stays bounded and unambiguous.
		{name: "a value too long", ns: "a", labels: map[string]string{"app.stack": strings.Repeat("x", 64)}, placement: both,
			wantErr: "is not a label value"},
		{name: "a value with '='", ns: "a", labels: map[string]string{"example.com/instance": "a=b"}, placement: both,
			wantErr: "is not a label value"},
		{name: "a key stored before the CRD checked it", ns: "a", labels: map[string]string{"bad key": "x"},
			placement: &policyv1alpha1.Placement{WorkloadAffinity: &policyv1alpha1.WorkloadAffinity{
				AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: "bad key"}}},
			wantErr: "is not a label key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := WorkloadAffinityGroups(tc.ns, obj(tc.labels), tc.placement)
			var invalid *workloadAffinityLabelError
			switch {
			case tc.wantErr != "":
				if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case !reflect.DeepEqual(got, tc.want):
				t.Errorf("groups %+v, want %+v", got, tc.want)
			}
			if got != nil && (len(got.AffinityGroup) > workv1alpha1.MaxWorkloadAffinityGroupLength || len(got.AntiAffinityGroup) > workv1alpha1.MaxWorkloadAffinityGroupLength) {
				t.Errorf("group longer than %d: %+v", workv1alpha1.MaxWorkloadAffinityGroupLength, got)
			}
		})
	}
}

// Whatever label a tenant writes, a group is made only from a label key
// and value, splits back into them, and fits the binding's field.
func FuzzWorkloadAffinityGroups(f *testing.F) {
	f.Add("app.group", "frontend")
	f.Add("example.com/instance", "a=b")
	f.Add("k", "")
	f.Fuzz(func(t *testing.T, key, value string) {
		o := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}}}
		o.SetLabels(map[string]string{key: value})
		p := &policyv1alpha1.Placement{WorkloadAffinity: &policyv1alpha1.WorkloadAffinity{AntiAffinity: &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: key}}}
		groups, err := WorkloadAffinityGroups("ns", o, p)
		if err != nil || groups == nil {
			return
		}
		if len(groups.AntiAffinityGroup) > workv1alpha1.MaxWorkloadAffinityGroupLength {
			t.Fatalf("group %q longer than %d", groups.AntiAffinityGroup, workv1alpha1.MaxWorkloadAffinityGroupLength)
		}
		if k, v := workv1alpha1.SplitWorkloadAffinityGroup(groups.AntiAffinityGroup); k != key || v != value {
			t.Fatalf("group %q splits into %q, %q; made from %q, %q", groups.AntiAffinityGroup, k, v, key, value)
		}
	})
}
