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

package taintmanager

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	secs := func(s int64) *int64 { return &s }
	unreachable := func(added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: added}
	}
	defaults := Defaults{NotReadyTolerationSeconds: 600, UnreachableTolerationSeconds: 300}
	for _, c := range []struct {
		name        string
		tolerations []corev1.Toleration
		taints      []corev1.Taint
		evict       bool
		after       time.Duration
	}{
		{name: "no taints", evict: false},
		{name: "NoSchedule never evicts", taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "an untolerated NoExecute taint evicts at once", taints: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}, evict: true},
		{name: "the default toleration counts from timeAdded", taints: []corev1.Taint{unreachable(ago(100 * time.Second))}, after: 200 * time.Second},
		{name: "the default toleration has run out", taints: []corev1.Taint{unreachable(ago(301 * time.Second))}, evict: true},
		{name: "the placement's own toleration replaces the default",
			tolerations: []corev1.Toleration{{Key: clusterv1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(30)}},
			taints:      []corev1.Taint{unreachable(ago(31 * time.Second))}, evict: true},
		{name: "tolerationSeconds 0 evicts at once",
			tolerations: []corev1.Toleration{{Key: clusterv1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: secs(0)}},
			taints:      []corev1.Taint{unreachable(ago(0))}, evict: true},
		{name: "a toleration without seconds tolerates for good",
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			taints:      []corev1.Taint{unreachable(ago(time.Hour)), {Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}},
		{name: "the shortest matching toleration wins",
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, TolerationSeconds: secs(500)},
				{Key: clusterv1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: secs(60)}},
			taints: []corev1.Taint{unreachable(ago(10 * time.Second))}, after: 50 * time.Second},
		{name: "a taint without timeAdded waits the full toleration", taints: []corev1.Taint{unreachable(nil)}, after: 300 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Decide(defaults.WithDefaults(c.tolerations), c.taints, now)
			if v.Evict != c.evict || v.After != c.after {
				t.Errorf("Decide = evict %v after %s, want evict %v after %s", v.Evict, v.After, c.evict, c.after)
			}
		})
	}
}

func TestDefaultsAreNotWrittenIntoThePolicy(t *testing.T) {
	own := []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}}
	got := Defaults{NotReadyTolerationSeconds: 600, UnreachableTolerationSeconds: 600}.WithDefaults(own)
	if len(own) != 1 || len(got) != 3 {
		t.Fatalf("own %v, with defaults %v", own, got)
	}
}

func TestEvictCluster(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	spec := &workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}}
	task := workv1alpha1.GracefulEvictionTask{FromCluster: "member1", Reason: workv1alpha1.EvictionReasonTaintUntolerated, Producer: workv1alpha1.EvictionProducerTaintManager}
	if !workobjects.EvictCluster(spec, task, now) {
		t.Fatal("not evicted")
	}
	if len(spec.Clusters) != 1 || spec.Clusters[0].Name != "member2" || len(spec.GracefulEvictionTasks) != 1 || len(spec.EvictionHistory) != 1 {
		t.Fatalf("spec after eviction: %+v", spec)
	}
	got := spec.GracefulEvictionTasks[0]
	if *got.Replicas != 1 || got.CreationTimestamp == nil || len(got.ClustersBeforeFailover) != 2 {
		t.Errorf("task %+v", got)
	}
	if workobjects.EvictCluster(spec, task, now) {
		t.Error("evicted twice")
	}
	for range 40 {
		spec.Clusters = append(spec.Clusters, workv1alpha1.TargetCluster{Name: "member3"})
		task.FromCluster = "member3"
		workobjects.EvictCluster(spec, task, now)
	}
	if len(spec.EvictionHistory) != workobjects.MaxEvictionHistory || len(spec.GracefulEvictionTasks) != 2 {
		t.Errorf("history %d entries, %d tasks", len(spec.EvictionHistory), len(spec.GracefulEvictionTasks))
	}
}

// Issue 31 item 2: a NoExecute taint written by hand without timeAdded,
// tolerated for 30 s, evicts 30 s after the hub first saw it, whatever the
// number of passes in between and whether or not the stamp has landed.
// Decide alone (the old behaviour) read the missing time as now on every
// pass, so the deadline kept moving and nothing was ever evicted.
func TestHandWrittenTaintEvictsAfterItsToleration(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	taintClock := clustertaint.NewTaintClock(clk)
	secs := int64(30)
	tolerations := []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}}
	cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"},
		Spec: clusterv1alpha1.ClusterSpec{Taints: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}}}
	for pass := range 30 {
		now := clk.Now()
		v := Decide(tolerations, taintClock.Taints(cluster), now)
		if v.Evict || v.After != time.Duration(30-pass)*time.Second {
			t.Fatalf("pass %d at +%s: evict %v after %s, want after %ds", pass, now.Sub(t0), v.Evict, v.After, 30-pass)
		}
		if old := Decide(tolerations, cluster.Spec.Taints, now); old.After != 30*time.Second {
			t.Fatalf("the unstamped taint alone: after %s", old.After)
		}
		clk.Step(time.Second)
	}
	v := Decide(tolerations, taintClock.Taints(cluster), clk.Now())
	if !v.Evict || !v.DueAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("at +30s: %+v", v)
	}
	// The same once the cluster taint controller's stamp has landed, and
	// after a hub restart (a fresh clock) reading it.
	cluster.Spec.Taints = taintClock.Taints(cluster)
	if v := Decide(tolerations, clustertaint.NewTaintClock(clk).Taints(cluster), clk.Now()); !v.Evict || !v.DueAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("after the stamp, restarted: %+v", v)
	}
}
