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

package apis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// validationCase is one object applied to the apiserver. An empty want
// means the object must be accepted; otherwise it must be refused as
// Invalid with every want string in the message.
type validationCase struct {
	name string
	yaml string
	want []string
}

// TestValidation applies good and bad objects of every kind to a real
// kube-apiserver with Flotilla's CRDs and admission policy installed.
func TestValidation(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	cs, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	waitForAdmissionPolicy(t, env)
	for _, ns := range []string{"other", "flotilla-es-member1"} {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range append(append(acceptedCases, refusedCases...), overrideIdentityCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			obj := decodeStrict(t, tc.yaml)
			err := create(ctx, cs, obj)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid object refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid object accepted; want an error mentioning %q", tc.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}

	t.Run("update that moves a template's manifest to another namespace", func(t *testing.T) {
		rt, err := cs.WorkV1alpha1().ResourceTemplates("default").Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rt.Spec.Manifest.Raw = []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx","namespace":"other"}}`)
		_, err = cs.WorkV1alpha1().ResourceTemplates("default").Update(ctx, rt, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.manifest.metadata.namespace") {
			t.Fatalf("want Invalid naming spec.manifest.metadata.namespace, got %v", err)
		}
	})

	t.Run("cluster id is immutable", func(t *testing.T) {
		setID := func(name, id string) error {
			c, err := cs.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Spec.ID = id
			_, err = cs.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
			return err
		}
		refused := func(what string, err error) {
			t.Helper()
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.id") {
				t.Errorf("%s: want Invalid naming spec.id, got %v", what, err)
			}
		}
		refused("changed", setID("member1", "another-uid"))
		// Cleared then set again would let anyone who may write the spec
		// re-point the Cluster at another member.
		refused("cleared", setID("member1", ""))
		// member2 was created without an id: the agent sets it once.
		if err := setID("member2", "1a2b3c4d-0000-0000-0000-000000000002"); err != nil {
			t.Errorf("setting an empty spec.id once: %v", err)
		}
		refused("changed after being set once", setID("member2", "1a2b3c4d-0000-0000-0000-000000000099"))
		refused("cleared after being set once", setID("member2", ""))
	})

	t.Run("defaults", func(t *testing.T) {
		pp, err := cs.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
				Placement:         policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{}},
				Failover: &policyv1alpha1.FailoverBehavior{
					Application: &policyv1alpha1.ApplicationFailoverBehavior{},
					Cluster:     &policyv1alpha1.ClusterFailoverBehavior{},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		app := pp.Spec.Failover.Application
		for _, c := range []struct {
			field     string
			got, want any
		}{
			{"priority", ptr.Deref(pp.Spec.Priority, -1), int32(0)},
			{"preemption", pp.Spec.Preemption, policyv1alpha1.PreemptNever},
			{"conflictResolution", pp.Spec.ConflictResolution, policyv1alpha1.ConflictAbort},
			{"replicaSchedulingType", pp.Spec.Placement.ReplicaScheduling.ReplicaSchedulingType, policyv1alpha1.ReplicaSchedulingTypeDivided},
			{"application.purgeMode", app.PurgeMode, policyv1alpha1.PurgeModeGracefully},
			{"application.decisionConditions.tolerationSeconds", ptr.Deref(app.DecisionConditions.TolerationSeconds, -1), int32(300)},
			{"cluster.purgeMode", pp.Spec.Failover.Cluster.PurgeMode, policyv1alpha1.PurgeModeGracefully},
		} {
			if c.got != c.want {
				t.Errorf("%s defaulted to %v, want %v", c.field, c.got, c.want)
			}
		}
		c, err := cs.ClusterV1alpha1().Clusters().Get(ctx, "member2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Spec.SyncMode != clusterv1alpha1.Pull {
			t.Errorf("syncMode defaulted to %q, want Pull", c.Spec.SyncMode)
		}
		w, err := cs.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w.Spec.ApplyStrategy != workv1alpha1.ApplyStrategyServerSideApply || w.Spec.ConflictResolution != policyv1alpha1.ConflictAbort {
			t.Errorf("work defaults: applyStrategy %q conflictResolution %q, want ServerSideApply Abort", w.Spec.ApplyStrategy, w.Spec.ConflictResolution)
		}
	})

	t.Run("status subresources", func(t *testing.T) {
		testStatusSubresources(t, cs)
	})

	t.Run("printer columns", func(t *testing.T) {
		for _, c := range []struct{ path, columns string }{
			{"/apis/cluster.flotilla.io/v1alpha1/clusters", "Name READY DNS TAINTS MODE VERSION REMEDY AGE"},
			{"/apis/work.flotilla.io/v1alpha1/namespaces/default/resourcebindings", "Name SCHEDULED FULLYAPPLIED LAST-FAILOVER FROM TO AT AGE"},
			{"/apis/work.flotilla.io/v1alpha1/clusterresourcebindings", "Name SCHEDULED FULLYAPPLIED LAST-FAILOVER FROM TO AT AGE"},
			{"/apis/work.flotilla.io/v1alpha1/namespaces/flotilla-es-member1/works", "Name APPLIED AVAILABLE AGE"},
		} {
			table := &metav1.Table{}
			err := env.Kube.CoreV1().RESTClient().Get().AbsPath(c.path).
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table)
			if err != nil {
				t.Fatalf("%s as Table: %v", c.path, err)
			}
			var names []string
			for _, col := range table.ColumnDefinitions {
				names = append(names, col.Name)
			}
			if got := strings.Join(names, " "); got != c.columns {
				t.Errorf("%s columns = %q, want %q", c.path, got, c.columns)
			}
			if len(table.Rows) == 0 {
				t.Errorf("%s: no rows", c.path)
			}
			if c.path == "/apis/cluster.flotilla.io/v1alpha1/clusters" {
				checkClusterRows(t, table)
			}
		}
	})
}

// checkClusterRows checks what `kubectl get clusters` shows for the
// clusters the earlier subtests wrote.
func checkClusterRows(t *testing.T, table *metav1.Table) {
	t.Helper()
	want := map[string]string{
		"member1": "<nil> <nil> cluster.flotilla.io/unreachable Pull",
		"member2": "False True cluster.flotilla.io/not-ready Pull",
	}
	for _, row := range table.Rows {
		name := fmt.Sprint(row.Cells[0])
		w, ok := want[name]
		if !ok {
			continue
		}
		delete(want, name)
		if got := strings.TrimSpace(fmt.Sprintln(row.Cells[1:5]...)); got != w {
			t.Errorf("cluster %s: READY DNS TAINTS MODE = %q, want %q", name, got, w)
		}
	}
	for name := range want {
		t.Errorf("cluster %s missing from the table", name)
	}
}

// testStatusSubresources writes status through the status subresource and
// checks that spec writes leave it alone (and the other way round).
func testStatusSubresources(t *testing.T, cs versioned.Interface) {
	ctx := t.Context()
	clusters := cs.ClusterV1alpha1().Clusters()
	c, err := clusters.Get(ctx, "member2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	c.Status = clusterv1alpha1.ClusterStatus{
		KubernetesVersion: "v1.36.3",
		Conditions: []metav1.Condition{
			{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionFalse, Reason: clusterv1alpha1.ClusterReasonNotReachable, LastTransitionTime: now},
			{Type: clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady, Status: metav1.ConditionTrue, Reason: "Resolved", LastTransitionTime: now},
		},
		NodeSummary:   &clusterv1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 2},
		RemedyActions: []string{string(remedyv1alpha1.TrafficControl)},
	}
	c.Spec.Region = "ignored-by-status-write"
	if c, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c.Spec.Region == "ignored-by-status-write" {
		t.Error("a status write changed spec.region")
	}
	c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: clusterv1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now})
	c.Status = clusterv1alpha1.ClusterStatus{}
	if c, err = clusters.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(c.Status.Conditions) != 2 || c.Status.NodeSummary == nil || c.Status.NodeSummary.ReadyNum != 2 {
		t.Errorf("a spec write changed status: %+v", c.Status)
	}
	if len(c.Spec.Taints) != 1 || c.Spec.Taints[0].TimeAdded == nil || !c.Spec.Taints[0].TimeAdded.Equal(&now) {
		t.Errorf("taint not stored with timeAdded: %+v", c.Spec.Taints)
	}

	rbs := cs.WorkV1alpha1().ResourceBindings("default")
	rb, err := rbs.Get(ctx, "nginx-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb.Status.SchedulerObservedGeneration = rb.Generation
	rb.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: "Success", LastTransitionTime: now}}
	rb.Status.AggregatedStatus = []workv1alpha1.AggregatedStatusItem{{
		ClusterName:        "member1",
		Status:             &runtime.RawExtension{Raw: []byte(`{"replicas":1,"readyReplicas":0}`)},
		Applied:            true,
		Health:             workv1alpha1.ResourceUnhealthy,
		ObservedGeneration: rb.Generation,
		UnhealthySince:     &now,
	}}
	if rb, err = rbs.UpdateStatus(ctx, rb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := rb.Status.AggregatedStatus[0]
	if string(got.Status.Raw) != `{"readyReplicas":0,"replicas":1}` || got.UnhealthySince == nil || !got.UnhealthySince.Equal(&now) {
		t.Errorf("aggregated status not stored as written: status %s unhealthySince %v", got.Status.Raw, got.UnhealthySince)
	}

	works := cs.WorkV1alpha1().Works("flotilla-es-member1")
	w, err := works.Get(ctx, "nginx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: now, ObservedGeneration: w.Generation}}
	w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
		Identifier: workv1alpha1.ResourceIdentifier{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: "default", Name: "nginx"},
		Status:     &runtime.RawExtension{Raw: []byte(`{"availableReplicas":2}`)},
		Health:     workv1alpha1.ResourceHealthy,
	}}
	if w, err = works.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(w.Status.ManifestStatuses) != 1 || w.Status.ManifestStatuses[0].Health != workv1alpha1.ResourceHealthy {
		t.Errorf("work status not stored: %+v", w.Status)
	}
	w.Status.ManifestStatuses[0].Health = "Sick"
	if _, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("health Sick accepted in work status: %v", err)
	}

	mcis := cs.NetworkingV1alpha1().MultiClusterIngresses("default")
	mci, err := mcis.Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mci.Status.TrafficBlockClusters = []networkingv1alpha1.ClusterObject{{Name: "member1", BlockingTimestamp: now}}
	mci.Status.ServiceLocations = []networkingv1alpha1.ServiceLocation{{Name: "web", Clusters: []string{"member1", "member2"}}}
	mci.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.2"}}
	if mci, err = mcis.UpdateStatus(ctx, mci, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(mci.Status.TrafficBlockClusters) != 1 || len(mci.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("ingress status not stored: %+v", mci.Status)
	}

	rts := cs.WorkV1alpha1().ResourceTemplates("default")
	rt, err := rts.Get(ctx, "nginx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt.Status.Clusters = []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}
	rt.Status.WorkloadStatus = &runtime.RawExtension{Raw: []byte(`{"availableReplicas":3,"readyReplicas":3,"replicas":3}`)}
	if rt, err = rts.UpdateStatus(ctx, rt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if string(rt.Status.WorkloadStatus.Raw) != `{"availableReplicas":3,"readyReplicas":3,"replicas":3}` {
		t.Errorf("template workload status not stored: %s", rt.Status.WorkloadStatus.Raw)
	}
}

// decodeStrict decodes a YAML object into its Go type, failing on fields the
// Go types do not have: a Karmada YAML must port field for field.
func decodeStrict(t *testing.T, doc string) runtime.Object {
	t.Helper()
	s := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	obj, _, err := s.Decode([]byte(doc), nil, nil)
	if err != nil {
		t.Fatalf("decoding test object: %v", err)
	}
	return obj
}

// create creates obj with the typed client of its kind, refusing unknown
// fields on the server too.
func create(ctx context.Context, cs versioned.Interface, obj runtime.Object) error {
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	var err error
	switch o := obj.(type) {
	case *clusterv1alpha1.Cluster:
		_, err = cs.ClusterV1alpha1().Clusters().Create(ctx, o, opts)
	case *clusterv1alpha1.ClusterTaintPolicy:
		_, err = cs.ClusterV1alpha1().ClusterTaintPolicies().Create(ctx, o, opts)
	case *policyv1alpha1.PropagationPolicy:
		_, err = cs.PolicyV1alpha1().PropagationPolicies(o.Namespace).Create(ctx, o, opts)
	case *policyv1alpha1.ClusterPropagationPolicy:
		_, err = cs.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, o, opts)
	case *policyv1alpha1.OverridePolicy:
		_, err = cs.PolicyV1alpha1().OverridePolicies(o.Namespace).Create(ctx, o, opts)
	case *policyv1alpha1.ClusterOverridePolicy:
		_, err = cs.PolicyV1alpha1().ClusterOverridePolicies().Create(ctx, o, opts)
	case *workv1alpha1.ResourceTemplate:
		_, err = cs.WorkV1alpha1().ResourceTemplates(o.Namespace).Create(ctx, o, opts)
	case *workv1alpha1.ClusterResourceTemplate:
		_, err = cs.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, o, opts)
	case *workv1alpha1.ResourceBinding:
		_, err = cs.WorkV1alpha1().ResourceBindings(o.Namespace).Create(ctx, o, opts)
	case *workv1alpha1.ClusterResourceBinding:
		_, err = cs.WorkV1alpha1().ClusterResourceBindings().Create(ctx, o, opts)
	case *workv1alpha1.Work:
		_, err = cs.WorkV1alpha1().Works(o.Namespace).Create(ctx, o, opts)
	case *remedyv1alpha1.Remedy:
		_, err = cs.RemedyV1alpha1().Remedies().Create(ctx, o, opts)
	case *networkingv1alpha1.MultiClusterIngress:
		_, err = cs.NetworkingV1alpha1().MultiClusterIngresses(o.Namespace).Create(ctx, o, opts)
	case *appsv1alpha1.WorkloadRebalancer:
		_, err = cs.AppsV1alpha1().WorkloadRebalancers().Create(ctx, o, opts)
	default:
		return fmt.Errorf("no client for %T", obj)
	}
	return err
}

// waitForAdmissionPolicy waits until the apiserver enforces the template
// namespace policy testenv installed (policies take effect asynchronously).
func waitForAdmissionPolicy(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := t.Context()
	// The policy takes effect asynchronously: probe with a dry run.
	probe := decodeStrict(t, rtOtherNamespace).(*workv1alpha1.ResourceTemplate)
	cs := versioned.NewForConfigOrDie(env.Config)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.WorkV1alpha1().ResourceTemplates(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err), nil
	})
	if err != nil {
		t.Fatalf("admission policy not enforced after 30s: %v", err)
	}
	// Each policy takes effect on its own: probe the fieldOverrider one too.
	fo := decodeStrict(t, fieldOverriderPolicy("fo-probe", "      - fieldPath: /data/c\n        json:\n        - {subPath: /a, operator: add}\n")).(*policyv1alpha1.OverridePolicy)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.PolicyV1alpha1().OverridePolicies(fo.Namespace).Create(ctx, fo, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err), nil
	})
	if err != nil {
		t.Fatalf("admission policy flotilla-field-overrider-values not enforced after 30s: %v", err)
	}
}

// TestTemplateAuthorship: a tenant propagates only what they could create
// themselves. A real RBAC-limited user (allowed resourcetemplates and
// configmaps in team-a, nothing else) is refused, at create or when changing
// the manifest, any cluster-scoped kind, any other namespace and any kind
// they may not create; an admin's ClusterResourceTemplate passes; an identity
// that only edits a template's metadata (the garbage collector, a label) is
// not asked what it may create.
func TestTemplateAuthorship(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	admin := versioned.NewForConfigOrDie(env.Config)
	waitForAdmissionPolicy(t, env)
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant(t, env, "team-a", "alice",
		rbacv1.PolicyRule{APIGroups: []string{"work.flotilla.io"}, Resources: []string{"resourcetemplates"}, Verbs: []string{"get", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	alice := versioned.NewForConfigOrDie(env.UserConfig(t, "alice")).WorkV1alpha1().ResourceTemplates("team-a")

	configMap := template("team-a", "settings", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"b"}}`)
	// RBAC reaches the authorizer asynchronously: poll until alice's own
	// ConfigMap passes, then everything below is decided by the policy.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := alice.Create(ctx, configMap, metav1.CreateOptions{})
		if err != nil {
			t.Logf("waiting for alice's RBAC: %v", err)
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("alice may create a ConfigMap in team-a, so a template holding one must pass: %v", err)
	}

	for _, c := range []struct {
		name, manifest string
		forbidden      bool // Forbidden (authorizer) rather than Invalid
		want           []string
	}{
		{name: "a kind she may not create", forbidden: true,
			manifest: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`,
			want:     []string{"spec.manifest.kind", `"deployments" in API group "apps" in namespace "team-a"`, "alice"}},
		{name: "a ClusterRoleBinding", manifest: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"own-the-fleet"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"subjects":[{"kind":"User","name":"alice"}]}`,
			want: []string{"spec.manifest.kind", `"ClusterRoleBinding"`, "cluster-scoped"}},
		{name: "a cluster-scoped kind spelled in lower case", manifest: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"clusterrolebinding","metadata":{"name":"x"}}`,
			want: []string{"spec.manifest.kind", "cluster-scoped"}},
		{name: "a Namespace", manifest: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system"}}`,
			want: []string{"spec.manifest.kind", "cluster-scoped"}},
		{name: "a CRD", manifest: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"x.example.com"}}`,
			want: []string{"spec.manifest.kind", "cluster-scoped"}},
		{name: "a webhook", manifest: `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"x"}}`,
			want: []string{"spec.manifest.kind", "cluster-scoped"}},
		{name: "a ConfigMap of another namespace", manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"team-b"}}`,
			want: []string{"spec.manifest.metadata.namespace", `"team-b"`}},
		{name: "a ConfigMap of kube-system", manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"kube-system"}}`,
			want: []string{"spec.manifest.metadata.namespace", `"kube-system"`}},
		{name: "a Secret (same group as ConfigMap)", forbidden: true, manifest: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`,
			want: []string{"spec.manifest.kind", `"secrets" in API group ""`}},
		{name: "a ConfigMap under another group", forbidden: true, manifest: `{"apiVersion":"example.com/v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
			want: []string{"spec.manifest.kind", `"configmaps" in API group "example.com"`}},
		{name: "a cluster-scoped kind under an upper-case group", manifest: `{"apiVersion":"RBAC.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"x"}}`,
			want: []string{"spec.manifest.kind", "cluster-scoped"}},
		{name: "an add-on's cluster-scoped kind", manifest: `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"GatewayClass","metadata":{"name":"x"}}`,
			want: []string{"spec.manifest.kind", "cluster-scoped"}},
		{name: "a List smuggling a ClusterRoleBinding", forbidden: true, manifest: `{"apiVersion":"v1","kind":"List","metadata":{"name":"x"},
"items":[{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"x"}}]}`,
			want: []string{"spec.manifest.kind", `"lists" in API group ""`}},
	} {
		t.Run("refused at create: "+c.name, func(t *testing.T) {
			_, err := alice.Create(ctx, template("team-a", "bad", c.manifest), metav1.CreateOptions{})
			checkRefused(t, err, c.forbidden, c.want...)
		})
		t.Run("refused as a change of the manifest: "+c.name, func(t *testing.T) {
			cur, err := alice.Get(ctx, "settings", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur.Spec.Manifest.Raw = []byte(c.manifest)
			_, err = alice.Update(ctx, cur, metav1.UpdateOptions{})
			checkRefused(t, err, c.forbidden, c.want...)
		})
	}

	t.Run("admin's ClusterResourceTemplate with a ClusterRoleBinding", func(t *testing.T) {
		crt := &workv1alpha1.ClusterResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ops"},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"ops"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"Group","name":"ops"}]}`)}}}}
		if _, err := admin.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, crt, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ClusterResourceTemplate by someone who may not create its kind cluster-wide", func(t *testing.T) {
		// A mistaken grant of clusterresourcetemplates is not a grant of
		// everything a ClusterResourceTemplate could hold.
		grantClusterWide(t, env, "bob", rbacv1.PolicyRule{APIGroups: []string{"work.flotilla.io"}, Resources: []string{"clusterresourcetemplates"}, Verbs: []string{"create"}})
		bob := versioned.NewForConfigOrDie(env.UserConfig(t, "bob")).WorkV1alpha1().ClusterResourceTemplates()
		crt := &workv1alpha1.ClusterResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "bob-admin"},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"bob-admin"}}`)}}}}
		var err error
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err = bob.Create(ctx, crt, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "spec.manifest.kind"), nil
		})
		checkRefused(t, err, true, "spec.manifest.kind", `"clusterrolebindings" in API group "rbac.authorization.k8s.io" cluster-wide`)
	})

	t.Run("the resource is guessed from the kind as client-go guesses it", func(t *testing.T) {
		// Grant exactly meta.UnsafeGuessKindToResource's plural: accepted,
		// so the policy's guess is the same (Gateway's wrong "gatewaies"
		// included: a wrong guess is refused unless that name is granted).
		kinds := []schema.GroupVersionKind{
			{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
			{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
			{Version: "v1", Kind: "Endpoints"},
			{Group: "apps", Version: "v1", Kind: "StatefulSet"},
			{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "Gateway"},
			{Group: "example.com", Version: "v1", Kind: "Status"},
		}
		var rules []rbacv1.PolicyRule
		for _, gvk := range kinds {
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{gvk.Group}, Resources: []string{plural.Resource}, Verbs: []string{"create"}})
		}
		grant(t, env, "team-b", "carol", append(rules,
			rbacv1.PolicyRule{APIGroups: []string{"work.flotilla.io"}, Resources: []string{"resourcetemplates"}, Verbs: []string{"create"}})...)
		carol := versioned.NewForConfigOrDie(env.UserConfig(t, "carol")).WorkV1alpha1().ResourceTemplates("team-b")
		for _, gvk := range kinds {
			apiVersion, kind := gvk.GroupVersion().String(), gvk.Kind
			rt := template("team-b", strings.ToLower(kind), `{"apiVersion":"`+apiVersion+`","kind":"`+kind+`","metadata":{"name":"x"}}`)
			var err error
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err = carol.Create(ctx, rt, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err == nil, nil
			})
			if err != nil {
				t.Errorf("%s: granted create on the guessed resource, still refused: %v", gvk, err)
			}
		}
		_, err := carol.Create(ctx, template("team-b", "deploy", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}`), metav1.CreateOptions{})
		checkRefused(t, err, true, `"deployments" in API group "apps"`)
	})

	t.Run("metadata-only updates are not asked about the manifest", func(t *testing.T) {
		// The admin puts a Deployment in team-a. The hub's identity (and the
		// garbage collector) may not create Deployments there, yet must be
		// able to change the template's labels and finalizers.
		rt, err := admin.WorkV1alpha1().ResourceTemplates("team-a").Create(ctx,
			template("team-a", "web", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hubUser := "system:serviceaccount:flotilla-system:flotilla-hub"
		grant(t, env, "team-a", hubUser, rbacv1.PolicyRule{APIGroups: []string{"work.flotilla.io"},
			Resources: []string{"resourcetemplates"}, Verbs: []string{"get", "update"}})
		hub := versioned.NewForConfigOrDie(env.UserConfig(t, hubUser)).WorkV1alpha1().ResourceTemplates("team-a")
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cur, err := hub.Get(ctx, rt.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cur.Labels = map[string]string{"seen-by": "hub"}
			cur.Finalizers = []string{"example.com/hold"}
			_, err = hub.Update(ctx, cur, metav1.UpdateOptions{})
			if err != nil {
				t.Logf("hub identity update: %v", err)
			}
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("an identity that may not create Deployments could not change a template's labels and finalizers: %v", err)
		}
		// The same identity changing the manifest is refused.
		cur, err := hub.Get(ctx, rt.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Finalizers = nil
		cur.Spec.Manifest.Raw = []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"x":"y"}}}`)
		_, err = hub.Update(ctx, cur, metav1.UpdateOptions{})
		checkRefused(t, err, true, `"deployments" in API group "apps" in namespace "team-a"`)
	})
}

// TestAgentMayOnlyReleaseItsWorks: the agent identity's RBAC update on works
// exists to remove the execution finalizer; flotilla-agent-work-scope keeps
// it to that.
func TestAgentMayOnlyReleaseItsWorks(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	admin := versioned.NewForConfigOrDie(env.Config)
	ns := "flotilla-es-member1"
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agentUser := "system:serviceaccount:" + ns + ":flotilla-agent"
	// The Role the hub gives an agent (pkg/hub/clusterlifecycle).
	grant(t, env, ns, agentUser,
		rbacv1.PolicyRule{APIGroups: []string{"work.flotilla.io"}, Resources: []string{"works"}, Verbs: []string{"get", "list", "watch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"work.flotilla.io"}, Resources: []string{"works/status"}, Verbs: []string{"update", "patch"}})
	agent := versioned.NewForConfigOrDie(env.UserConfig(t, agentUser)).WorkV1alpha1().Works(ns)
	work := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns, Labels: map[string]string{"work.flotilla.io/binding-uid": "u1"},
			Annotations: map[string]string{"work.flotilla.io/cluster": "member1"},
			Finalizers:  []string{workv1alpha1.ExecutionFinalizer, "example.com/other"}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`)}}}}},
	}
	if _, err := admin.WorkV1alpha1().Works(ns).Create(ctx, work, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	change := func(f func(*workv1alpha1.Work), dryRun bool) error {
		w, err := agent.Get(ctx, "w", metav1.GetOptions{})
		if err != nil {
			return err
		}
		f(w)
		opts := metav1.UpdateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = agent.Update(ctx, w, opts)
		return err
	}
	editSpec := func(w *workv1alpha1.Work) {
		w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"kube-system"}}`)
	}
	// RBAC and the policy take effect asynchronously: poll until refused.
	var err error
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		err = change(editSpec, true)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "flotilla-agent-work-scope"), nil
	})
	for what, f := range map[string]func(*workv1alpha1.Work){
		"edit the spec":   editSpec,
		"suspend it":      func(w *workv1alpha1.Work) { w.Spec.SuspendDispatching = ptr.To(true) },
		"relabel it":      func(w *workv1alpha1.Work) { w.Labels["work.flotilla.io/binding-uid"] = "u2" },
		"drop its labels": func(w *workv1alpha1.Work) { w.Labels = nil },
		"annotate it":     func(w *workv1alpha1.Work) { w.Annotations["x"] = "y" },
		"add an owner": func(w *workv1alpha1.Work) {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"}}
		},
		"add a finalizer":                  func(w *workv1alpha1.Work) { w.Finalizers = append(w.Finalizers, "example.com/mine") },
		"remove another finalizer":         func(w *workv1alpha1.Work) { w.Finalizers = []string{workv1alpha1.ExecutionFinalizer} },
		"swap the execution finalizer out": func(w *workv1alpha1.Work) { w.Finalizers = []string{"example.com/other", "example.com/mine"} },
	} {
		if err := change(f, false); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "flotilla-agent-work-scope") {
			t.Errorf("the agent may not %s: want Forbidden by flotilla-agent-work-scope, got %v", what, err)
		}
	}

	w, err := agent.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied",
		LastTransitionTime: metav1.Now(), ObservedGeneration: w.Generation}}
	if _, err := agent.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the agent reports status: %v", err)
	}
	if err := change(func(w *workv1alpha1.Work) {
		w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == workv1alpha1.ExecutionFinalizer })
	}, false); err != nil {
		t.Errorf("the agent releases its Work by removing %s: %v", workv1alpha1.ExecutionFinalizer, err)
	}
	got, err := admin.WorkV1alpha1().Works(ns).Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Finalizers, []string{"example.com/other"}) || got.Labels["work.flotilla.io/binding-uid"] != "u1" || string(got.Spec.Workload.Manifests[0].Raw) != string(work.Spec.Workload.Manifests[0].Raw) {
		t.Errorf("after the agent's edits the Work is %+v %s, want only the execution finalizer gone", got.ObjectMeta, got.Spec.Workload.Manifests[0].Raw)
	}
	// Not an agent: the hub (here the admin) still edits its Works.
	got.Spec.SuspendDispatching = ptr.To(true)
	if _, err := admin.WorkV1alpha1().Works(ns).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the policy must not match other identities: %v", err)
	}
}

func template(ns, name, manifest string) *workv1alpha1.ResourceTemplate {
	return &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
}

// grant gives user the rules in ns (a Role and a RoleBinding named after it).
func grant(t *testing.T, env *testenv.Env, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	name := "test:" + strings.ReplaceAll(user, ":", "-")
	if _, err := env.Kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grantClusterWide gives user the rules everywhere.
func grantClusterWide(t *testing.T, env *testenv.Env, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	name := "test:" + user
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkRefused: err is Forbidden (the author may not create the kind) or
// Invalid (the template may not hold it), and names every want.
func checkRefused(t *testing.T, err error, forbidden bool, want ...string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("accepted; want refused naming %q", want)
	case forbidden && !apierrors.IsForbidden(err), !forbidden && !apierrors.IsInvalid(err):
		t.Fatalf("want Forbidden=%v / Invalid=%v, got %v", forbidden, !forbidden, err)
	}
	t.Logf("refused: %v", err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
}
