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

package wrap

import (
	"reflect"
	"strings"
	"testing"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Karmada's workloadAffinity examples convert with their terms as written,
// nothing reported; the Jobs become templates that keep their group label.
func TestKarmadaWorkloadAffinity(t *testing.T) {
	res, objs := convertFile(t, "issue39-workload-affinity.yaml", Options{})
	if got := paths(res); len(got) > 0 {
		t.Errorf("unsupported fields %v, want none", got)
	}
	var kinds []string
	for _, o := range res.Objects {
		kinds = append(kinds, o.GetKind()+" "+describeName(o.GetNamespace(), o.GetName()))
	}
	wantKinds := []string{"PropagationPolicy default/training-job-affinity", "ResourceTemplate default/training-job-1",
		"ResourceTemplate default/training-job-2", "PropagationPolicy default/flink-anti-affinity",
		"PropagationPolicy default/combined-affinity", "ClusterPropagationPolicy flink-anti-affinity-example"}
	if !reflect.DeepEqual(kinds, wantKinds) {
		t.Fatalf("output %v, want %v", kinds, wantKinds)
	}
	affinity := func(key string) *policyv1alpha1.WorkloadAffinityTerm {
		return &policyv1alpha1.WorkloadAffinityTerm{GroupByLabelKey: key}
	}
	anti := func(key string) *policyv1alpha1.WorkloadAntiAffinityTerm {
		return &policyv1alpha1.WorkloadAntiAffinityTerm{GroupByLabelKey: key}
	}
	for i, want := range map[int]*policyv1alpha1.WorkloadAffinity{
		0: {Affinity: affinity("app.group")},
		3: {AntiAffinity: anti("pipeline.id")},
		4: {Affinity: affinity("app.stack"), AntiAffinity: anti("app.instance")},
	} {
		if got := objs[i].(*policyv1alpha1.PropagationPolicy).Spec.Placement.WorkloadAffinity; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: workloadAffinity %+v, want %+v", kinds[i], got, want)
		}
	}
	if got := objs[5].(*policyv1alpha1.ClusterPropagationPolicy).Spec.Placement.WorkloadAffinity; !reflect.DeepEqual(got, &policyv1alpha1.WorkloadAffinity{AntiAffinity: anti("karmada.io/group")}) {
		t.Errorf("flink-anti-affinity-example: workloadAffinity %+v", got)
	}
	// Each policy is noted once: the gate, and for antiAffinity the
	// evicted copies.
	for _, want := range []struct {
		object string
		anti   bool
	}{{"PropagationPolicy default/training-job-affinity", false}, {"PropagationPolicy default/flink-anti-affinity", true},
		{"PropagationPolicy default/combined-affinity", true}, {"ClusterPropagationPolicy flink-anti-affinity-example", true}} {
		var found []string
		for _, n := range res.Notes {
			if strings.HasPrefix(n, want.object+": spec.placement.workloadAffinity: ") {
				found = append(found, n)
			}
		}
		if len(found) != 1 || !strings.Contains(found[0], "feature gate WorkloadAffinity") ||
			strings.Contains(found[0], "gracefully evicted") != want.anti {
			t.Errorf("%s: workloadAffinity notes %q", want.object, found)
		}
	}
	for _, i := range []int{1, 2} {
		obj, err := workobjects.Object(objs[i].(*workv1alpha1.ResourceTemplate))
		if err != nil {
			t.Fatal(err)
		}
		if g := obj.GetLabels()["app.group"]; g != "ml-training" {
			t.Errorf("%s: the Job's app.group label is %q, want ml-training (the group is read from it)", kinds[i], g)
		}
	}
}
