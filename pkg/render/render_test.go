package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/overrides"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The clusters of the tests: m1 in eu on aws labelled tier=gold, m2 in us
// on gcp, m3 in eu on gcp.
var clusters = map[string]*clusterv1alpha1.Cluster{
	"m1": {ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{"tier": "gold"}},
		Spec: clusterv1alpha1.ClusterSpec{Provider: "aws", Region: "eu"}},
	"m2": {ObjectMeta: metav1.ObjectMeta{Name: "m2"}, Spec: clusterv1alpha1.ClusterSpec{Provider: "gcp", Region: "us"}},
	"m3": {ObjectMeta: metav1.ObjectMeta{Name: "m3"}, Spec: clusterv1alpha1.ClusterSpec{Provider: "gcp", Region: "eu"}},
}

func deployment(replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "tmpl-uid", "resourceVersion": "7", "generation": int64(3),
			"labels":          map[string]any{"app": "web"},
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}}},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx:1"}}}}},
		"status": map[string]any{"readyReplicas": int64(2)},
	}}
}

func job(parallelism, completions int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "batch", "namespace": "shop"},
		"spec":     map[string]any{"parallelism": parallelism, "completions": completions},
	}}
}

func configMap() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop"},
		"data":     map[string]any{"a": "b"},
	}}
}

func placed(replicas int32, scheduling policyv1alpha1.ReplicaSchedulingType, targets ...workv1alpha1.TargetCluster) *workv1alpha1.ResourceBinding {
	return &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "web-deployment", Namespace: "shop", UID: "binding-uid"},
		Spec: workv1alpha1.ResourceBindingSpec{Replicas: replicas, Clusters: targets,
			Placement: &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: scheduling}}},
	}
}

func on(name string, replicas int32) workv1alpha1.TargetCluster {
	return workv1alpha1.TargetCluster{Name: name, Replicas: replicas}
}

func plaintext(op policyv1alpha1.OverriderOperator, path, value string) policyv1alpha1.Overriders {
	o := policyv1alpha1.PlaintextOverrider{Path: path, Operator: op}
	if value != "" {
		o.Value = apiextensionsv1.JSON{Raw: []byte(value)}
	}
	return policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{o}}
}

func addLabel(k, v string) policyv1alpha1.Overriders {
	return policyv1alpha1.Overriders{LabelsOverrider: []policyv1alpha1.LabelAnnotationOverrider{
		{Operator: policyv1alpha1.OverriderOpAdd, Value: map[string]string{k: v}}}}
}

func clusterOverride(name string, target *policyv1alpha1.ClusterAffinity, o policyv1alpha1.Overriders) *policyv1alpha1.ClusterOverridePolicy {
	return &policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{TargetCluster: target, Overriders: o}}}}
}

func override(ns, name string, target *policyv1alpha1.ClusterAffinity, o policyv1alpha1.Overriders) *policyv1alpha1.OverridePolicy {
	return &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1alpha1.OverrideSpec{OverrideRules: []policyv1alpha1.RuleWithCluster{{TargetCluster: target, Overriders: o}}}}
}

// storedWork is a cluster's Work as the hub stored it, recording state.
func storedWork(owner *workv1alpha1.ResourceBinding, cluster string, state map[string]string) *workv1alpha1.Work {
	raw, _ := json.Marshal(state)
	return &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{
		Name: workobjects.WorkName(owner.Namespace, owner.Name), Namespace: "flotilla-es-" + cluster,
		Labels: map[string]string{workobjects.LabelBindingUID: string(owner.UID)},
		Annotations: map[string]string{workobjects.AnnotationBindingNamespace: owner.Namespace, workobjects.AnnotationBindingName: owner.Name,
			workv1alpha1.AnnotationPreservedLabelState: string(raw)}}}
}

// reviser is a ReplicaReviser that records its calls, and fails when told.
type reviser struct {
	calls []int32
	err   error
}

func (r *reviser) ReviseReplica(obj *unstructured.Unstructured, replicas int32) error {
	r.calls = append(r.calls, replicas)
	if r.err != nil {
		return r.err
	}
	return unstructured.SetNestedField(obj.Object, int64(replicas), "spec", "replicas")
}

// rendered is what a case checks of a Work: fields of its manifest, the
// manifest's labels and annotations, and the Work's own.
type rendered struct {
	manifest map[string]any
	work     *workv1alpha1.Work
}

func (r rendered) field(path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(r.manifest, path...)
	return v
}

func TestWork(t *testing.T) {
	euGold := &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}
	gcpEU := &policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{
		{Key: "provider", Operator: corev1.NodeSelectorOpIn, Values: []string{"gcp"}},
		{Key: "region", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}}}}
	byName := &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m2"}}
	labelPolicies := []*policyv1alpha1.ClusterOverridePolicy{
		clusterOverride("by-labels", euGold, addLabel("via", "labels")),
		clusterOverride("by-fields", gcpEU, addLabel("via", "fields")),
		clusterOverride("by-name", byName, addLabel("via", "name")),
	}
	at := func(s int) *metav1.Time { tm := metav1.NewTime(time.Unix(1000+int64(s), 0)); return &tm }
	checkpoint := workv1alpha1.GracefulEvictionTask{FromCluster: "m1", PurgeMode: policyv1alpha1.PurgeModeGracefully, CreationTimestamp: at(0),
		ClustersBeforeFailover: []string{"m1"}, PreservedLabelState: map[string]string{"flink/job-id": "j1", "flink/checkpoint": "s3://b/ckpt-7"}}

	type check func(t *testing.T, r rendered, res Result)
	replicasAre := func(want int64) check {
		return func(t *testing.T, r rendered, res Result) {
			if got := r.field("spec", "replicas"); got != want {
				t.Errorf("spec.replicas = %v, want %d", got, want)
			}
			if res.Replicas == nil || int64(*res.Replicas) != want {
				t.Errorf("Result.Replicas = %v, want %d", res.Replicas, want)
			}
		}
	}
	notRevised := func(want any) check {
		return func(t *testing.T, r rendered, res Result) {
			if got := r.field("spec", "replicas"); got != want {
				t.Errorf("spec.replicas = %v, want the template's %v", got, want)
			}
			if res.Replicas != nil {
				t.Errorf("Result.Replicas = %d, want nil (not revised)", *res.Replicas)
			}
		}
	}
	fieldIs := func(want any, path ...string) check {
		return func(t *testing.T, r rendered, _ Result) {
			if got := r.field(path...); !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s = %v, want %v", strings.Join(path, "."), got, want)
			}
		}
	}
	overridden := func(policies ...string) check {
		return func(t *testing.T, r rendered, res Result) {
			var got []string
			if res.Overrides != nil {
				for _, p := range res.Overrides.ClusterOverridePolicies {
					got = append(got, "ClusterOverridePolicy "+p.PolicyName)
				}
				for _, p := range res.Overrides.OverridePolicies {
					got = append(got, "OverridePolicy "+p.PolicyName)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(policies) {
				t.Errorf("applied overrides = %v, want %v", got, policies)
			}
			raw, ok := r.work.Annotations[overrides.AnnotationAppliedOverrides]
			if ok != (len(policies) > 0) {
				t.Fatalf("applied-overrides annotation present = %v with %d policies applied", ok, len(policies))
			}
			if ok {
				var recorded overrides.AppliedOverrides
				if err := json.Unmarshal([]byte(raw), &recorded); err != nil || !apiequality.Semantic.DeepEqual(&recorded, res.Overrides) {
					t.Errorf("applied-overrides annotation %s does not record Result.Overrides (%v)", raw, err)
				}
			}
		}
	}
	carries := func(want map[string]string, labels, annotations map[string]string) check {
		return func(t *testing.T, r rendered, res Result) {
			if !apiequality.Semantic.DeepEqual(res.CarriedState, want) {
				t.Errorf("Result.CarriedState = %v, want %v", res.CarriedState, want)
			}
			raw, ok := r.work.Annotations[workv1alpha1.AnnotationPreservedLabelState]
			if ok != (len(want) > 0) {
				t.Fatalf("preserved-state annotation present = %v, want state %v", ok, want)
			}
			if ok {
				var recorded map[string]string
				if err := json.Unmarshal([]byte(raw), &recorded); err != nil || !apiequality.Semantic.DeepEqual(recorded, want) {
					t.Errorf("preserved-state annotation = %s, want %v", raw, want)
				}
			}
			for k, v := range labels {
				if got := r.field("metadata", "labels", k); got != v {
					t.Errorf("manifest label %s = %v, want %q", k, got, v)
				}
			}
			for k, v := range annotations {
				if got := r.field("metadata", "annotations", k); got != v {
					t.Errorf("manifest annotation %s = %v, want %q", k, got, v)
				}
			}
		}
	}
	settings := func(want WorkSettings) check {
		return func(t *testing.T, r rendered, res Result) {
			if !apiequality.Semantic.DeepEqual(res.Settings, want) {
				t.Errorf("Result.Settings = %s, want %s", show(res.Settings), show(want))
			}
			s := r.work.Spec
			if got := (WorkSettings{PreserveResourcesOnDeletion: s.PreserveResourcesOnDeletion, SuspendDispatching: s.SuspendDispatching,
				ApplyStrategy: s.ApplyStrategy, ConflictResolution: s.ConflictResolution}); !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("Work settings = %s, want %s", show(got), show(want))
			}
		}
	}
	defaults := WorkSettings{ApplyStrategy: policyv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictAbort}

	for _, c := range []struct {
		name        string
		binding     *workv1alpha1.ResourceBinding
		object      *unstructured.Unstructured
		cluster     string
		cops        []*policyv1alpha1.ClusterOverridePolicy
		ops         []*policyv1alpha1.OverridePolicy
		current     *workv1alpha1.Work
		interpreter *reviser
		wantErr     string // a substring of the error; "" for none
		identity    bool   // the error is an *IdentityError
		checks      []check
	}{
		{name: "Duplicated: every cluster runs all replicas", cluster: "m2",
			binding: placed(3, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 3), on("m2", 3)), object: deployment(3),
			checks: []check{replicasAre(3), overridden(), carries(nil, nil, nil), settings(defaults)}},
		{name: "Divided: the cluster's share", cluster: "m2",
			binding: placed(5, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 2), on("m2", 3)), object: deployment(5),
			checks: []check{replicasAre(3)}},
		{name: "Divided: a cluster with no share runs none", cluster: "m1",
			binding: placed(2, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 0), on("m2", 2)), object: deployment(2),
			checks: []check{replicasAre(0)}},
		{name: "a graceful shrink keeps the old count while its task lasts", cluster: "m2",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(3, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 2), on("m2", 1))
				b.Spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{{FromCluster: "m2", Replicas: ptr.To[int32](3), PurgeMode: policyv1alpha1.PurgeModeGracefully}}
				return b
			}(), object: deployment(3), checks: []check{replicasAre(3)}},
		{name: "the interpreter revises the replicas", cluster: "m1", interpreter: &reviser{},
			binding: placed(4, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 4)), object: configMap(),
			checks: []check{replicasAre(4)}},
		{name: "the interpreter's error is the cluster's", cluster: "m1", interpreter: &reviser{err: errors.New("replicas path is not a number")},
			binding: placed(4, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 4)), object: deployment(4),
			wantErr: "replicas path is not a number"},
		{name: "a Divided Job runs its share of the completions", cluster: "m2",
			binding: placed(4, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 1), on("m2", 3)), object: job(4, 10),
			checks: []check{fieldIs(int64(3), "spec", "parallelism"), fieldIs(int64(7), "spec", "completions")}},
		{name: "a Duplicated Job runs all completions", cluster: "m2",
			binding: placed(4, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 4), on("m2", 4)), object: job(4, 10),
			checks: []check{fieldIs(int64(4), "spec", "parallelism"), fieldIs(int64(10), "spec", "completions")}},
		{name: "a Divided Job with completions that are no count is refused", cluster: "m1",
			binding: placed(2, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 2)), object: func() *unstructured.Unstructured {
				j := job(2, 0)
				_ = unstructured.SetNestedField(j.Object, "ten", "spec", "completions")
				return j
			}(), wantErr: ".spec.completions"},
		{name: "a cluster where only a dependent runs: the template's replicas, the dependent's settings", cluster: "m3",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(5, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 5))
				b.Spec.RequiredBy = []workv1alpha1.BindingSnapshot{{Namespace: "shop", Name: "api", Clusters: []workv1alpha1.TargetCluster{{Name: "m3", Replicas: 2}},
					ApplyStrategy: policyv1alpha1.ApplyStrategyReadOnly, PreserveResourcesOnDeletion: ptr.To(true)}}
				return b
			}(), object: deployment(5),
			checks: []check{notRevised(int64(5)), settings(WorkSettings{PreserveResourcesOnDeletion: ptr.To(true), ApplyStrategy: policyv1alpha1.ApplyStrategyReadOnly,
				ConflictResolution: policyv1alpha1.ConflictAbort})}},
		{name: "dependency settings: the safest of the object's policy and a dependent's", cluster: "m1",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(0, "", on("m1", 0))
				b.Spec.ApplyStrategy, b.Spec.ConflictResolution = policyv1alpha1.ApplyStrategyCreateOnly, policyv1alpha1.ConflictOverwrite
				b.Spec.RequiredBy = []workv1alpha1.BindingSnapshot{{Namespace: "shop", Name: "api", Clusters: []workv1alpha1.TargetCluster{{Name: "m1"}},
					ConflictResolution: policyv1alpha1.ConflictAbort, Suspension: &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}}}
				return b
			}(), object: configMap(),
			checks: []check{settings(WorkSettings{SuspendDispatching: ptr.To(true), ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly,
				ConflictResolution: policyv1alpha1.ConflictAbort})}},
		{name: "no replicas: nothing revised", cluster: "m1", interpreter: &reviser{},
			binding: placed(0, "", on("m1", 0)), object: configMap(), checks: []check{notRevised(nil)}},
		{name: "overrides: selected by labels", cluster: "m1", cops: labelPolicies,
			binding: placed(3, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 3), on("m2", 3), on("m3", 3)), object: deployment(3),
			checks: []check{fieldIs("labels", "metadata", "labels", "via"), fieldIs("web", "metadata", "labels", "app"), overridden("ClusterOverridePolicy by-labels")}},
		{name: "overrides: selected by name", cluster: "m2", cops: labelPolicies,
			binding: placed(3, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 3), on("m2", 3), on("m3", 3)), object: deployment(3),
			checks: []check{fieldIs("name", "metadata", "labels", "via"), overridden("ClusterOverridePolicy by-name")}},
		{name: "overrides: selected by fields (provider and region)", cluster: "m3", cops: labelPolicies,
			binding: placed(3, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 3), on("m2", 3), on("m3", 3)), object: deployment(3),
			checks: []check{fieldIs("fields", "metadata", "labels", "via"), overridden("ClusterOverridePolicy by-fields")}},
		{name: "overrides run after the replicas are revised, the namespace's policy after the cluster-wide one", cluster: "m1",
			cops: []*policyv1alpha1.ClusterOverridePolicy{clusterOverride("image", nil, plaintext(policyv1alpha1.OverriderOpReplace,
				"/spec/template/spec/containers/0/image", `"nginx:2"`))},
			ops: []*policyv1alpha1.OverridePolicy{override("shop", "pin", &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m1"}},
				plaintext(policyv1alpha1.OverriderOpReplace, "/spec/replicas", `9`)),
				override("other", "elsewhere", nil, addLabel("leak", "yes"))},
			binding: placed(4, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 2), on("m2", 2)), object: deployment(4),
			checks: []check{fieldIs(int64(9), "spec", "replicas"), fieldIs(nil, "metadata", "labels", "leak"),
				fieldIs([]any{map[string]any{"name": "web", "image": "nginx:2"}}, "spec", "template", "spec", "containers"),
				overridden("ClusterOverridePolicy image", "OverridePolicy pin")}},
		{name: "an override that cannot be applied is the cluster's error", cluster: "m1",
			ops:     []*policyv1alpha1.OverridePolicy{override("shop", "broken", nil, plaintext(policyv1alpha1.OverriderOpReplace, "/spec/missing/field", `1`))},
			binding: placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 1)), object: deployment(1),
			wantErr: "OverridePolicy shop/broken"},
		{name: "an override that changes the identity is refused", cluster: "m1",
			cops:    []*policyv1alpha1.ClusterOverridePolicy{clusterOverride("move", nil, plaintext(policyv1alpha1.OverriderOpReplace, "/metadata/namespace", `"kube-system"`))},
			binding: placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 1)), object: deployment(1),
			identity: true, wantErr: `metadata.namespace "shop" -> "kube-system"`},
		{name: "an override that renames on one cluster only is refused there only", cluster: "m2",
			cops: []*policyv1alpha1.ClusterOverridePolicy{clusterOverride("rename", &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m1"}},
				plaintext(policyv1alpha1.OverriderOpReplace, "/metadata/name", `"other"`))},
			binding: placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 1), on("m2", 1)), object: deployment(1),
			checks: []check{fieldIs("web", "metadata", "name"), overridden()}},
		{name: "carried state: a replacement gets the evicted copy's state, a path as an annotation", cluster: "m2",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m2", 1))
				b.Spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{checkpoint}
				return b
			}(), object: deployment(1),
			checks: []check{carries(checkpoint.PreservedLabelState, map[string]string{"flink/job-id": "j1", "app": "web"},
				map[string]string{"flink/checkpoint": "s3://b/ckpt-7"}), fieldIs(nil, "metadata", "labels", "flink/checkpoint")}},
		{name: "carried state: the evicted cluster's own copy gets none", cluster: "m1",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m2", 1))
				b.Spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{checkpoint}
				return b
			}(), object: deployment(1), checks: []check{carries(nil, nil, nil), notRevised(int64(1))}},
		{name: "carried state: what the stored Work recorded stays after the task", cluster: "m2",
			current: storedWork(placed(1, "", on("m2", 1)), "m2", map[string]string{"flink/job-id": "j0"}),
			binding: placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m2", 1)), object: deployment(1),
			checks: []check{carries(map[string]string{"flink/job-id": "j0"}, map[string]string{"flink/job-id": "j0"}, nil)}},
		{name: "carried state: another binding's Work records nothing for this one", cluster: "m2",
			current: func() *workv1alpha1.Work {
				other := placed(1, "", on("m2", 1))
				other.Namespace, other.UID = "other", "other-uid"
				return storedWork(other, "m2", map[string]string{"flink/job-id": "stolen"})
			}(),
			binding: placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m2", 1)), object: deployment(1),
			checks: []check{carries(nil, nil, nil)}},
		{name: "carried state: a Work being deleted records nothing (the new copy starts afresh)", cluster: "m2",
			current: func() *workv1alpha1.Work {
				w := storedWork(placed(1, "", on("m2", 1)), "m2", map[string]string{"flink/job-id": "j0"})
				w.DeletionTimestamp = at(5)
				return w
			}(),
			binding: placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m2", 1)), object: deployment(1),
			checks: []check{carries(nil, nil, nil)}},
		{name: "suspension on some clusters", cluster: "m1",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 1), on("m2", 1))
				b.Spec.Suspension = &policyv1alpha1.Suspension{DispatchingOnClusters: &policyv1alpha1.SuspendClusters{ClusterNames: []string{"m1"}}}
				return b
			}(), object: deployment(1), checks: []check{settings(WorkSettings{SuspendDispatching: ptr.To(true),
				ApplyStrategy: policyv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictAbort})}},
		{name: "suspension on some clusters: not on the others", cluster: "m2",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 1), on("m2", 1))
				b.Spec.Suspension = &policyv1alpha1.Suspension{DispatchingOnClusters: &policyv1alpha1.SuspendClusters{ClusterNames: []string{"m1"}}}
				return b
			}(), object: deployment(1), checks: []check{settings(defaults)}},
		{name: "apply strategy, conflict resolution and preservation of the binding's policy", cluster: "m1",
			binding: func() *workv1alpha1.ResourceBinding {
				b := placed(1, policyv1alpha1.ReplicaSchedulingTypeDuplicated, on("m1", 1))
				b.Spec.ApplyStrategy, b.Spec.ConflictResolution = policyv1alpha1.ApplyStrategyCreateOnly, policyv1alpha1.ConflictOverwrite
				b.Spec.PreserveResourcesOnDeletion = ptr.To(false)
				return b
			}(), object: deployment(1), checks: []check{settings(WorkSettings{PreserveResourcesOnDeletion: ptr.To(false),
				ApplyStrategy: policyv1alpha1.ApplyStrategyCreateOnly, ConflictResolution: policyv1alpha1.ConflictOverwrite})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Binding: c.binding, Object: c.object, TemplateGeneration: 3, Cluster: clusters[c.cluster],
				ClusterOverridePolicies: c.cops, OverridePolicies: c.ops, Current: c.current}
			if c.interpreter != nil {
				in.Interpreter = c.interpreter
			}
			before := inputCopy(in)
			work, res, err := Work(in)
			if !apiequality.Semantic.DeepEqual(inputCopy(in), before) {
				t.Errorf("Work changed its input")
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want one that says %q", err, c.wantErr)
				}
				if identity := (*IdentityError)(nil); errors.As(err, &identity) != c.identity {
					t.Errorf("error %v: an *IdentityError = %v, want %v", err, !c.identity, c.identity)
				}
				if work != nil {
					t.Errorf("a Work despite the error: %+v", work)
				}
				return
			}
			if err != nil {
				t.Fatalf("Work: %v", err)
			}
			manifest := &unstructured.Unstructured{}
			if err := manifest.UnmarshalJSON(work.Spec.Workload.Manifests[0].Raw); err != nil {
				t.Fatalf("manifest: %v", err)
			}
			r := rendered{manifest: manifest.Object, work: work}
			checkWorkMeta(t, c.binding, c.cluster, r)
			for _, check := range c.checks {
				check(t, r, res)
			}
			if c.interpreter != nil && res.Replicas != nil && fmt.Sprint(c.interpreter.calls) != fmt.Sprint([]int32{*res.Replicas}) {
				t.Errorf("interpreter called with %v, want [%d]", c.interpreter.calls, *res.Replicas)
			}
		})
	}
}

// checkWorkMeta: whatever the case, the Work is named for the binding in
// the cluster's namespace, says whose it is and what it renders, holds the
// execution finalizer, and its manifest is the object without status and
// server-set metadata.
func checkWorkMeta(t *testing.T, b *workv1alpha1.ResourceBinding, cluster string, r rendered) {
	t.Helper()
	w := r.work
	if w.Name != workobjects.WorkName(b.Namespace, b.Name) || w.Namespace != "flotilla-es-"+cluster || WorkKey(b, cluster) != w.Namespace+"/"+w.Name {
		t.Errorf("Work %s/%s (key %s), want %s in flotilla-es-%s", w.Namespace, w.Name, WorkKey(b, cluster), workobjects.WorkName(b.Namespace, b.Name), cluster)
	}
	if w.Labels[workobjects.LabelBindingUID] != string(b.UID) || len(w.Labels) != 1 {
		t.Errorf("Work labels = %v, want only the binding's UID", w.Labels)
	}
	for k, v := range map[string]string{workobjects.AnnotationBindingNamespace: b.Namespace, workobjects.AnnotationBindingName: b.Name,
		workobjects.AnnotationCluster: cluster, workv1alpha1.AnnotationTemplateGeneration: "3"} {
		if w.Annotations[k] != v {
			t.Errorf("Work annotation %s = %q, want %q", k, w.Annotations[k], v)
		}
	}
	for k := range w.Annotations {
		switch k {
		case workobjects.AnnotationBindingNamespace, workobjects.AnnotationBindingName, workobjects.AnnotationCluster, workv1alpha1.AnnotationTemplateGeneration:
		default:
			if !strings.Contains(strings.Join(OptionalAnnotations(), " "), k) {
				t.Errorf("Work annotation %s is neither always set nor optional (OptionalAnnotations)", k)
			}
		}
	}
	if fmt.Sprint(w.Finalizers) != fmt.Sprint([]string{workv1alpha1.ExecutionFinalizer}) {
		t.Errorf("Work finalizers = %v", w.Finalizers)
	}
	if !workobjects.OwnsWork(b, w) {
		t.Errorf("the binding does not own its own Work")
	}
	for _, path := range [][]string{{"status"}, {"metadata", "uid"}, {"metadata", "resourceVersion"}, {"metadata", "generation"}, {"metadata", "ownerReferences"}} {
		if v := r.field(path...); v != nil {
			t.Errorf("manifest keeps %s: %v", strings.Join(path, "."), v)
		}
	}
}

// inputCopy is a deep copy of what Work may not change.
func inputCopy(in Input) []any {
	out := []any{in.Binding.DeepCopy(), in.Object.DeepCopy(), in.Cluster.DeepCopy()}
	for _, p := range in.ClusterOverridePolicies {
		out = append(out, p.DeepCopy())
	}
	for _, p := range in.OverridePolicies {
		out = append(out, p.DeepCopy())
	}
	if in.Current != nil {
		out = append(out, in.Current.DeepCopy())
	}
	return out
}

// The same input gives the same Work, byte for byte: a stored Work compares
// equal and is not rewritten.
func TestWorkIsDeterministic(t *testing.T) {
	b := placed(4, policyv1alpha1.ReplicaSchedulingTypeDivided, on("m1", 1), on("m2", 3))
	b.Spec.GracefulEvictionTasks = []workv1alpha1.GracefulEvictionTask{{FromCluster: "m3", ClustersBeforeFailover: []string{"m3"},
		PreservedLabelState: map[string]string{"a": "1", "b": "2", "c": "x/y", "d": "4"}}}
	cops := []*policyv1alpha1.ClusterOverridePolicy{clusterOverride("z", nil, addLabel("z", "1")), clusterOverride("a", nil, addLabel("a", "0"))}
	in := Input{Binding: b, Object: deployment(4), TemplateGeneration: 1, Cluster: clusters["m2"], ClusterOverridePolicies: cops}
	first, _, err := Work(in)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _, err := Work(in)
		if err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(first, again) {
			t.Fatalf("two renderings differ:\n%+v\n%+v", first, again)
		}
	}
}
