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

package clusterstatus

import (
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// A member whose nodes or pods carry absurd quantities (issue 36): the
// agent still writes a summary the hub's CRD admits (a refused status
// write would lose the Ready condition too) and the hub can compute
// with, within a bounded time. On c1a0803 the summary carried
// 1e10000000 and a sum past 9P, and summing took seconds.
func TestResourceSummaryIsBounded(t *testing.T) {
	nodes := []*corev1.Node{
		nodeWith("n1", corev1.ConditionTrue, resList("cpu", "4", "memory", "16Gi", "pods", "110")),
		nodeWith("absurd", corev1.ConditionTrue, resList("cpu", "1e10000000", "memory", "-1", "pods", "110")),
		nodeWith("huge1", corev1.ConditionTrue, resList("ephemeral-storage", "5P")),
		nodeWith("huge2", corev1.ConditionTrue, resList("ephemeral-storage", "5P")),
	}
	pods := []*corev1.Pod{
		podWith("n1", corev1.PodRunning, resList("cpu", "500m")),
		podWith("n1", corev1.PodRunning, resList("cpu", "1e10000000")),
		podWith("", corev1.PodPending, resList("memory", "1Gi"), resList("cpu", "99999999999999999999")),
		podWith("", corev1.PodPending, resList("memory", "2Gi")),
	}
	done := make(chan *clusterv1alpha1.ResourceSummary, 1)
	go func() { done <- ResourceSummary(nodes, pods) }()
	var s *clusterv1alpha1.ResourceSummary
	select {
	case s = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ResourceSummary not returned within 5s")
	}
	if err := quantities.CheckSummary(s); err != nil {
		t.Fatalf("summary out of range: %v", err)
	}
	pattern := regexp.MustCompile(quantities.CRDPattern)
	for _, l := range []corev1.ResourceList{s.Allocatable, s.Allocated, s.Allocating} {
		for name, q := range l {
			if v := q.String(); len(v) > quantities.MaxLength || !pattern.MatchString(v) {
				t.Errorf("%s = %q: the CRD refuses it", name, v)
			}
		}
	}
	for _, c := range []struct {
		list corev1.ResourceList
		want corev1.ResourceList
	}{
		{s.Allocatable, resList("cpu", "4", "memory", "16Gi", "pods", "220", "ephemeral-storage", "9P")},
		{s.Allocated, resList("cpu", "500m", "pods", "1")},
		{s.Allocating, resList("memory", "2Gi")},
	} {
		if !sameResources(c.list, c.want) {
			t.Errorf("got %v, want %v", c.list, c.want)
		}
	}
}
