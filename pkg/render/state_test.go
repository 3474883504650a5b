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

package render

import (
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestPreservedLabels(t *testing.T) {
	at := func(s int) *metav1.Time { tm := metav1.NewTime(time.Unix(1000+int64(s), 0)); return &tm }
	task := func(from string, mode policyv1alpha1.PurgeMode, created int, state map[string]string, before ...string) workv1alpha1.GracefulEvictionTask {
		return workv1alpha1.GracefulEvictionTask{FromCluster: from, PurgeMode: mode, CreationTimestamp: at(created),
			PreservedLabelState: state, ClustersBeforeFailover: before}
	}
	ckpt := func(v string) map[string]string { return map[string]string{"ckpt": v} }
	cases := []struct {
		name     string
		tasks    []workv1alpha1.GracefulEvictionTask
		cluster  string
		recorded map[string]string
		want     map[string]string
	}{
		{"new cluster of a Gracefully task", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeGracefully, 0, ckpt("a"), "m1")}, "m2", nil, ckpt("a")},
		{"new cluster of a Directly task", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeDirectly, 0, ckpt("a"), "m1")}, "m3", nil, ckpt("a")},
		{"new cluster of a Never task", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeNever, 0, ckpt("a"), "m1")}, "m3", nil, ckpt("a")},
		{"a cluster that ran it before gets nothing", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeGracefully, 0, ckpt("a"), "m1", "m2")}, "m2", nil, nil},
		{"the evicted cluster gets nothing", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeGracefully, 0, ckpt("a"), "m1")}, "m1", nil, nil},
		{"a task without clustersBeforeFailover injects nothing", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeGracefully, 0, ckpt("a"))}, "m2", nil, nil},
		{"a task without state keeps what was recorded", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeGracefully, 0, nil, "m1")}, "m2", ckpt("old"), ckpt("old")},
		{"recorded state stays after the task ended", nil, "m2", ckpt("a"), ckpt("a")},
		{"a later failover replaces the recorded state", []workv1alpha1.GracefulEvictionTask{task("m1", policyv1alpha1.PurgeModeGracefully, 0, ckpt("b"), "m1")}, "m2",
			map[string]string{"ckpt": "a", "other": "x"}, ckpt("b")},
		{"the newest task wins a key", []workv1alpha1.GracefulEvictionTask{
			task("m4", policyv1alpha1.PurgeModeGracefully, 5, map[string]string{"ckpt": "new"}, "m4"),
			task("m1", policyv1alpha1.PurgeModeGracefully, 1, map[string]string{"ckpt": "old", "job": "j"}, "m1"),
		}, "m2", nil, map[string]string{"ckpt": "new", "job": "j"}},
		{"nothing at all", nil, "m2", nil, nil},
	}
	for _, tc := range cases {
		if got := PreservedLabels(tc.tasks, tc.cluster, tc.recorded); !apiequality.Semantic.DeepEqual(got, tc.want) {
			t.Errorf("%s: PreservedLabels = %v, want %v", tc.name, got, tc.want)
		}
	}
}
