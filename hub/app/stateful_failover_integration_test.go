package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/statepreservation"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Stateful failover (issue 18 item 1) against a real apiserver and the
// whole hub; the test plays the member agents. A failover reads its
// statePreservation rules from the last status the hub saw of the copy it
// moves away from, and the copies that replace it carry the values as
// labels — for any purge mode, any number of replacement clusters, and for
// as long as each copy runs there.

const (
	spTaintKey   = "example.com/stateful-failover"
	spCkptLabel  = "flink.example.io/checkpoint-path"
	spFlinkName  = "wordcount"
	spFlinkRB    = "wordcount-flinkdeployment"
	spFlinkKind  = "FlinkDeployment"
	spFlinkGroup = "flink.example.io"
)

func spFlinkManifest(parallelism int) string {
	return fmt.Sprintf(`{"apiVersion":"flink.example.io/v1beta1","kind":"FlinkDeployment","metadata":{"name":"wordcount","labels":{"app":"wordcount"}},
"spec":{"image":"flink:1.20","flinkVersion":"v1_20","job":{"jarURI":"local:///opt/flink/examples/streaming/WordCount.jar","parallelism":%d,"upgradeMode":"last-state"}}}`, parallelism)
}

// spStartHub starts the hub with clusters that stay Ready without a Lease:
// only the test's taints and reports move workloads.
func spStartHub(t *testing.T, clusters ...string) (context.Context, flotillaclient.Interface, kubernetes.Interface) {
	t.Helper()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	createReadyClusters(t, ctx, fc, clusters...)
	return ctx, fc, kubernetes.NewForConfigOrDie(env.Config)
}

// spTaint adds or removes the test's taint with effect on cluster.
func spTaint(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string, effect corev1.TaintEffect, add bool) {
	t.Helper()
	waitUntil(t, "taint on "+cluster+" changed", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var taints []corev1.Taint
		for _, taint := range c.Spec.Taints {
			if taint.Key != spTaintKey || taint.Effect != effect {
				taints = append(taints, taint)
			}
		}
		if add {
			taints = append(taints, corev1.Taint{Key: spTaintKey, Effect: effect, TimeAdded: &metav1.Time{Time: time.Now()}})
		}
		c.Spec.Taints = taints
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// spClusters waits until the binding is placed exactly on clusters.
func spClusters(t *testing.T, ctx context.Context, fc flotillaclient.Interface, binding string, clusters ...string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("binding %s placed on %v", binding, clusters), func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil || len(rb.Spec.Clusters) != len(clusters) {
			return false, err
		}
		for _, c := range clusters {
			if !spTargets(rb, c) {
				return false, nil
			}
		}
		return true, nil
	})
}

func spTargets(rb *workv1alpha1.ResourceBinding, cluster string) bool {
	for _, c := range rb.Spec.Clusters {
		if c.Name == cluster {
			return true
		}
	}
	return false
}

// spReport writes cluster's Work status as its agent would: applied, with
// the object's status and health, for the Work's current generation.
func spReport(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster, binding, group, kind, name, status string, health workv1alpha1.ResourceHealth) {
	t.Helper()
	waitUntil(t, "status of "+cluster+"'s Work written", func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName("default", binding), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: w.Generation})
		w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: group, Version: "v1", Kind: kind, Namespace: "default", Name: name},
			Status:     &runtime.RawExtension{Raw: []byte(status)}, Health: health}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// spWaitSeen waits until the binding's aggregated status holds what
// cluster reported, with health: the failover reads it from there.
func spWaitSeen(t *testing.T, ctx context.Context, fc flotillaclient.Interface, binding, cluster, substr string, health workv1alpha1.ResourceHealth) {
	t.Helper()
	waitUntil(t, "the hub sees "+cluster+"'s status", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, it := range rb.Status.AggregatedStatus {
			if it.ClusterName == cluster && it.Status != nil && strings.Contains(string(it.Status.Raw), substr) &&
				it.Health == health && it.ObservedGeneration == rb.Generation {
				return true, nil
			}
		}
		return false, nil
	})
}

// spLabel is a label of the workload in cluster's Work ("" and false when
// the Work or label is absent).
func spLabel(ctx context.Context, fc flotillaclient.Interface, cluster, binding, key string) (string, bool, *workv1alpha1.Work) {
	w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName("default", binding), metav1.GetOptions{})
	if err != nil || len(w.Spec.Workload.Manifests) == 0 {
		return "", false, nil
	}
	obj := &unstructured.Unstructured{}
	if obj.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw) != nil {
		return "", false, w
	}
	// A value that is a valid label value is a label; any other (a path
	// with slashes) is an annotation of the same key.
	if v, ok := obj.GetLabels()[key]; ok {
		return v, ok, w
	}
	v, ok := obj.GetAnnotations()[key]
	return v, ok, w
}

// spWaitLabel waits until cluster's Work carries key=value on its workload
// and records it in the preserved-label-state annotation.
func spWaitLabel(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster, binding, key, value string) *workv1alpha1.Work {
	t.Helper()
	var got *workv1alpha1.Work
	waitUntil(t, fmt.Sprintf("%s's Work carries %s=%s", cluster, key, value), func() (bool, error) {
		v, ok, w := spLabel(ctx, fc, cluster, binding, key)
		if !ok || v != value {
			return false, nil
		}
		var recorded map[string]string
		if json.Unmarshal([]byte(w.Annotations[workv1alpha1.AnnotationPreservedLabelState]), &recorded) != nil || recorded[key] != value {
			return false, nil
		}
		got = w
		return true, nil
	})
	return got
}

// spReleaseDeleted plays cluster's agent: a Work being deleted loses its
// finalizer. It reports whether the Work is gone.
func spReleaseDeleted(ctx context.Context, fc flotillaclient.Interface, cluster, binding string) bool {
	w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName("default", binding), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	if err == nil && w.DeletionTimestamp != nil {
		w.Finalizers = nil
		_, _ = fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{})
	}
	return false
}

// spWaitEvent waits for an event with reason whose message contains each
// of msgs, on the object of kind and name.
func spWaitEvent(t *testing.T, kube kubernetes.Interface, kind, name, reason string, msgs ...string) {
	t.Helper()
	waitUntil(t, "event "+reason+" on "+kind+" "+name, func() (bool, error) {
		events, err := kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String()})
		if err != nil {
			return false, nil
		}
	next:
		for _, e := range events.Items {
			if e.InvolvedObject.Kind != kind {
				continue
			}
			for _, m := range msgs {
				if !strings.Contains(e.Message, m) {
					continue next
				}
			}
			return true, nil
		}
		return false, nil
	})
}

func spCreate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, policy *policyv1alpha1.PropagationPolicy, tmpl *workv1alpha1.ResourceTemplate) {
	t.Helper()
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A Flink-like custom resource runs on member1 with
// failover.cluster.statePreservation. member1 fails (NoExecute): the new
// copy on member2 carries the checkpoint path member1 last reported, as a
// annotation (a path with slashes is no label value) and its job id as a
// label; two bad rules (a path kubectl's JSONPath cannot parse, one that
// selects an object) are reported on the binding and the template
// and do not hold the failover. After the task has ended, a template
// change re-renders member2's copy and the label stays.
func TestStatefulFailoverCarriesCheckpointToReplacement(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := spStartHub(t, "member1", "member2")
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "flink", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "flink.example.io/v1beta1", Kind: spFlinkKind, Name: spFlinkName}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Cluster: &policyv1alpha1.ClusterFailoverBehavior{
				StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
					{AliasLabelName: spCkptLabel, JSONPath: "{.jobStatus.checkpointPath}"},
					{AliasLabelName: "flink.example.io/job-id", JSONPath: "{ .jobStatus.jobId }"},
					{AliasLabelName: "flink.example.io/broken", JSONPath: "{.jobStatus.{}"},
					{AliasLabelName: "flink.example.io/savepoint", JSONPath: "{.jobStatus.savepointInfo}"},
				}},
			}},
		}}
	spCreate(t, ctx, fc, policy, rtOf("default", spFlinkName, spFlinkManifest(2)))
	spClusters(t, ctx, fc, spFlinkRB, "member1")
	const checkpoint = "s3://flink/checkpoints/wordcount/chk-42"
	const status = `{"lifecycleState":"STABLE","jobStatus":{"state":"RUNNING","jobId":"b4a9e9c0c7a54e0d","checkpointPath":"` + checkpoint + `",
		"savepointInfo":{"location":"s3://flink/savepoints/sp-1"}}}`
	spReport(t, ctx, fc, "member1", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName, status, workv1alpha1.ResourceHealthy)
	spWaitSeen(t, ctx, fc, spFlinkRB, "member1", checkpoint, workv1alpha1.ResourceHealthy)

	spTaint(t, ctx, fc, "member1", corev1.TaintEffectNoExecute, true)
	spClusters(t, ctx, fc, spFlinkRB, "member2")
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Spec.GracefulEvictionTasks) != 1 || rb.Spec.GracefulEvictionTasks[0].PreservedLabelState[spCkptLabel] != checkpoint ||
		len(rb.Spec.GracefulEvictionTasks[0].PreservedLabelState) != 2 {
		t.Fatalf("eviction task %+v; want member1's checkpoint path and job id preserved, and nothing for the bad rules", rb.Spec.GracefulEvictionTasks)
	}
	w2 := spWaitLabel(t, ctx, fc, "member2", spFlinkRB, spCkptLabel, checkpoint)
	if m := manifestOf(t, w2); m.GetAnnotations()[spCkptLabel] != checkpoint || m.GetLabels()["flink.example.io/job-id"] != "b4a9e9c0c7a54e0d" {
		t.Fatalf("member2's copy: labels %v annotations %v; want the job id as a label and the checkpoint path as an annotation", m.GetLabels(), m.GetAnnotations())
	}
	if _, ok, _ := spLabel(ctx, fc, "member1", spFlinkRB, spCkptLabel); ok {
		t.Error("the evicted copy on member1 got the preserved label")
	}
	// The bad rules are reported, once per eviction, on both objects.
	for _, obj := range []struct{ kind, name string }{{"ResourceBinding", spFlinkRB}, {"ResourceTemplate", spFlinkName}} {
		spWaitEvent(t, kube, obj.kind, obj.name, statepreservation.EventStatePreservationFailed,
			"flink.example.io/broken", "does not parse", "flink.example.io/savepoint", "want a string, number or boolean")
		spWaitEvent(t, kube, obj.kind, obj.name, statepreservation.EventStatePreserved, spCkptLabel+"="+checkpoint)
	}

	// member2's copy is healthy: the task ends and member1's copy goes.
	spReport(t, ctx, fc, "member2", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName,
		`{"lifecycleState":"STABLE","jobStatus":{"state":"RUNNING","checkpointPath":"ckpt-0043"}}`, workv1alpha1.ResourceHealthy)
	waitUntil(t, "task ended and member1's Work gone", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
		if err != nil || len(rb.Spec.GracefulEvictionTasks) != 0 {
			return false, err
		}
		return spReleaseDeleted(ctx, fc, "member1", spFlinkRB), nil
	})

	// A template change re-renders member2's copy; the label stays for as
	// long as the copy runs there, though the task is gone.
	waitUntil(t, "template changed", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(ctx, spFlinkName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rt.Spec.Manifest.Raw = []byte(spFlinkManifest(4))
		_, err = fc.WorkV1alpha1().ResourceTemplates("default").Update(ctx, rt, metav1.UpdateOptions{})
		return err == nil, nil
	})
	w := waitWork(t, fc, "member2", "default", spFlinkRB, func(o *unstructured.Unstructured) bool {
		p, _, _ := unstructured.NestedInt64(o.Object, "spec", "job", "parallelism")
		return p == 4
	})
	if v := manifestOf(t, w).GetAnnotations()[spCkptLabel]; v != checkpoint {
		t.Fatalf("after the template change member2's workload annotations are %v; want %s=%s kept", manifestOf(t, w).GetAnnotations(), spCkptLabel, checkpoint)
	}
	if manifestOf(t, w).GetLabels()["app"] != "wordcount" {
		t.Errorf("the template's own labels were lost: %v", manifestOf(t, w).GetLabels())
	}
}

// Application failover with purgeMode Directly: the application is
// Unhealthy on member1 (Duplicated on 2 of 3 clusters); member1's copy is
// deleted first, and the copy that replaces it on member3 carries the
// state member1 last reported. member2, which ran it before, gets nothing.
// The Directly task ends only once member3's Work carries the state, and
// the label stays after it has ended.
func TestStatefulFailoverApplicationDirectly(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := spStartHub(t, "member1", "member2", "member3")
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "flink", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "flink.example.io/v1beta1", Kind: spFlinkKind, Name: spFlinkName}},
			Placement: policyv1alpha1.Placement{
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
				DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](1)},
				PurgeMode:          policyv1alpha1.PurgeModeDirectly,
				StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
					{AliasLabelName: spCkptLabel, JSONPath: "{.jobStatus.checkpointPath}"},
					{AliasLabelName: "flink.example.io/job-state", JSONPath: "{.jobStatus.state}"},
				}},
			}},
		}}
	spCreate(t, ctx, fc, policy, rtOf("default", spFlinkName, spFlinkManifest(2)))
	spClusters(t, ctx, fc, spFlinkRB, "member1", "member2")
	spReport(t, ctx, fc, "member2", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName,
		`{"jobStatus":{"state":"RUNNING","checkpointPath":"ckpt-m2"}}`, workv1alpha1.ResourceHealthy)
	spReport(t, ctx, fc, "member1", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName,
		`{"jobStatus":{"state":"FAILING","checkpointPath":"ckpt-0077"}}`, workv1alpha1.ResourceUnhealthy)
	spWaitSeen(t, ctx, fc, spFlinkRB, "member2", "ckpt-m2", workv1alpha1.ResourceHealthy)

	// member1's copy is deleted first (Directly): play its agent until the
	// replacement appears.
	waitUntil(t, "member1's copy deleted and the workload placed on member2 and member3", func() (bool, error) {
		gone := spReleaseDeleted(ctx, fc, "member1", spFlinkRB)
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return gone && spTargets(rb, "member2") && spTargets(rb, "member3") && !spTargets(rb, "member1"), nil
	})
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Spec.EvictionHistory) == 0 || rb.Spec.EvictionHistory[0].Reason != workv1alpha1.EvictionReasonApplicationFailure {
		t.Fatalf("eviction history %+v; want an application failure", rb.Spec.EvictionHistory)
	}
	w := spWaitLabel(t, ctx, fc, "member3", spFlinkRB, spCkptLabel, "ckpt-0077")
	if v := manifestOf(t, w).GetLabels()["flink.example.io/job-state"]; v != "FAILING" {
		t.Errorf("member3's job-state label = %q, want FAILING", v)
	}
	if _, ok, _ := spLabel(ctx, fc, "member2", spFlinkRB, spCkptLabel); ok {
		t.Error("member2 ran the workload before the failover; it must not get the preserved state")
	}
	waitUntil(t, "the Directly task ended", func() (bool, error) {
		spReleaseDeleted(ctx, fc, "member1", spFlinkRB)
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
		return err == nil && len(rb.Spec.GracefulEvictionTasks) == 0, err
	})
	// The binding changes again (member3 reports); the label stays.
	spReport(t, ctx, fc, "member3", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName,
		`{"jobStatus":{"state":"RUNNING","checkpointPath":"ckpt-0078"}}`, workv1alpha1.ResourceHealthy)
	spWaitSeen(t, ctx, fc, spFlinkRB, "member3", "ckpt-0078", workv1alpha1.ResourceHealthy)
	spWaitLabel(t, ctx, fc, "member3", spFlinkRB, spCkptLabel, "ckpt-0077")
}

// A Divided Deployment runs all 4 replicas on member1; member1 fails and
// its share is split between member2 and member3, with purgeMode Never:
// both new copies carry the state (Karmada injects it only when one
// cluster replaces one, and only with Directly).
func TestStatefulFailoverDividedToTwoClusters(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := spStartHub(t, "member1", "member2", "member3")
	// Only member1 fits at first, so it gets all replicas.
	spTaint(t, ctx, fc, "member2", corev1.TaintEffectNoSchedule, true)
	spTaint(t, ctx, fc, "member3", corev1.TaintEffectNoSchedule, true)
	const label = "example.com/available-before-failover"
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}}, Weight: 1},
					}},
				},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Cluster: &policyv1alpha1.ClusterFailoverBehavior{
				PurgeMode: policyv1alpha1.PurgeModeNever,
				StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
					{AliasLabelName: label, JSONPath: "{.availableReplicas}"},
				}},
			}},
		}}
	spCreate(t, ctx, fc, policy, rtOf("default", "nginx", strings.Replace(nginxManifest, `"replicas":3`, `"replicas":4`, 1)))
	const binding = "nginx-deployment"
	waitReplicas(t, fc, "default", binding, map[string]int32{"member1": 4})
	spReport(t, ctx, fc, "member1", binding, "apps", "Deployment", "nginx",
		`{"replicas":4,"readyReplicas":4,"availableReplicas":4,"updatedReplicas":4}`, workv1alpha1.ResourceHealthy)
	spWaitSeen(t, ctx, fc, binding, "member1", `"availableReplicas":4`, workv1alpha1.ResourceHealthy)
	spTaint(t, ctx, fc, "member2", corev1.TaintEffectNoSchedule, false)
	spTaint(t, ctx, fc, "member3", corev1.TaintEffectNoSchedule, false)

	spTaint(t, ctx, fc, "member1", corev1.TaintEffectNoExecute, true)
	waitReplicas(t, fc, "default", binding, map[string]int32{"member2": 2, "member3": 2})
	spWaitLabel(t, ctx, fc, "member2", binding, label, "4")
	spWaitLabel(t, ctx, fc, "member3", binding, label, "4")
	// purgeMode Never keeps member1's copy, which gets no label.
	if v, ok, w := spLabel(ctx, fc, "member1", binding, label); w == nil || ok {
		t.Errorf("member1's Work %v with label %q; want the old copy kept (Never) without the label", w != nil, v)
	}
}

// purgeMode Directly ends a task when the old copy is gone, which may be
// before any replacement exists: here nothing can replace member1 at
// first (member3 does not fit yet, and the spread wants 2 clusters). The
// task, which carries the state, stays until member3 fits and its Work
// carries the state; had it ended with the old copy, member3's copy would
// have started without the checkpoint (and the scheduler would have taken
// the unhealthy member1 back).
func TestStatefulFailoverDirectlyWaitsForReplacement(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := spStartHub(t, "member1", "member2", "member3")
	spTaint(t, ctx, fc, "member3", corev1.TaintEffectNoSchedule, true)
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "flink", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "flink.example.io/v1beta1", Kind: spFlinkKind, Name: spFlinkName}},
			Placement: policyv1alpha1.Placement{
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
				DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](1)},
				PurgeMode:          policyv1alpha1.PurgeModeDirectly,
				StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
					{AliasLabelName: spCkptLabel, JSONPath: "{.jobStatus.checkpointPath}"},
				}},
			}},
		}}
	spCreate(t, ctx, fc, policy, rtOf("default", spFlinkName, spFlinkManifest(2)))
	spClusters(t, ctx, fc, spFlinkRB, "member1", "member2")
	spReport(t, ctx, fc, "member2", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName,
		`{"jobStatus":{"state":"RUNNING","checkpointPath":"ckpt-m2"}}`, workv1alpha1.ResourceHealthy)
	spReport(t, ctx, fc, "member1", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName,
		`{"jobStatus":{"state":"FAILING","checkpointPath":"ckpt-0099"}}`, workv1alpha1.ResourceUnhealthy)
	spWaitSeen(t, ctx, fc, spFlinkRB, "member2", "ckpt-m2", workv1alpha1.ResourceHealthy)

	waitUntil(t, "member1 evicted and its copy deleted", func() (bool, error) {
		gone := spReleaseDeleted(ctx, fc, "member1", spFlinkRB)
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return gone && len(rb.Spec.EvictionHistory) > 0, nil
	})
	// The old copy is gone; nothing replaced it yet: the task holds.
	for range 20 {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rb.Spec.GracefulEvictionTasks) != 1 || spTargets(rb, "member1") {
			t.Fatalf("the Directly task ended before a replacement carried its state: tasks %+v, clusters %+v",
				rb.Spec.GracefulEvictionTasks, rb.Spec.Clusters)
		}
		time.Sleep(50 * time.Millisecond)
	}
	spTaint(t, ctx, fc, "member3", corev1.TaintEffectNoSchedule, false)
	spClusters(t, ctx, fc, spFlinkRB, "member2", "member3")
	spWaitLabel(t, ctx, fc, "member3", spFlinkRB, spCkptLabel, "ckpt-0099")
	waitUntil(t, "the Directly task ended", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
		return err == nil && len(rb.Spec.GracefulEvictionTasks) == 0, err
	})
	spWaitLabel(t, ctx, fc, "member3", spFlinkRB, spCkptLabel, "ckpt-0099")
}
