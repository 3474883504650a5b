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

package clustersummary

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

func TestCondition(t *testing.T) {
	summary := func(allocated string) *clusterv1alpha1.ResourceSummary {
		return &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")},
			Allocated: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocated)}}
	}
	shown := []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionResourceSummaryInRange, Status: metav1.ConditionFalse}}
	for _, c := range []struct {
		name    string
		summary *clusterv1alpha1.ResourceSummary
		shown   []metav1.Condition
		status  metav1.ConditionStatus // "" for no condition
		message string
	}{
		{"in range, never out: no condition", summary("3"), nil, "", ""},
		{"no summary", nil, nil, "", ""},
		{"out of range", summary("9e18"), nil, metav1.ConditionFalse, `status.resourceSummary.allocated.cpu: "9e+18": out of range`},
		{"negative", summary("-1"), nil, metav1.ConditionFalse, `status.resourceSummary.allocated.cpu: "-1": out of range: negative`},
		{"in range again", summary("3"), shown, metav1.ConditionTrue, "in range"},
	} {
		cl := &clusterv1alpha1.Cluster{Status: clusterv1alpha1.ClusterStatus{ResourceSummary: c.summary, Conditions: c.shown}}
		got := Condition(cl)
		switch {
		case c.status == "" && got != nil:
			t.Errorf("%s: %+v, want none", c.name, got)
		case c.status != "" && (got == nil || got.Status != c.status || !strings.Contains(got.Message, c.message)):
			t.Errorf("%s: %+v, want %s saying %q", c.name, got, c.status, c.message)
		}
	}
}
