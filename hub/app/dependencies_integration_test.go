package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/detector"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// dpStartHub starts the hub with clusters that stay Ready without a Lease
// for the test (only the test's taints move workloads) and returns a kube
// client too.
func dpStartHub(t *testing.T, clusters ...string) (context.Context, flotillaclient.Interface, kubernetes.Interface) {
	t.Helper()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	createReadyClusters(t, ctx, fc, clusters...)
	return ctx, fc, kubernetes.NewForConfigOrDie(env.Config)
}

func dpCreate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns, name, manifest string) {
	t.Helper()
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, name, manifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// dpWebManifest is a Deployment that reads ConfigMap web-settings (envFrom)
// and Secret web-creds (a volume).
const dpWebManifest = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
"spec":{"containers":[{"name":"web","image":"nginx:1.27","envFrom":[{"configMapRef":{"name":"web-settings"}}],
"volumeMounts":[{"name":"creds","mountPath":"/creds"}]}],"volumes":[{"name":"creds","secret":{"secretName":"web-creds"}}]}}}}`

func dpPolicy(ns, name, kind, object string, propagateDeps bool, placement policyv1alpha1.Placement) *policyv1alpha1.PropagationPolicy {
	apiVersion := "apps/v1"
	if kind == "Pod" {
		apiVersion = "v1"
	}
	return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: apiVersion, Kind: kind, Name: object}},
			Placement:         placement,
			PropagateDeps:     propagateDeps,
		}}
}

// dpWorkExists waits for the binding's Work on cluster.
func dpWorkExists(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string) *workv1alpha1.Work {
	t.Helper()
	return waitWork(t, fc, cluster, ns, binding, func(*unstructured.Unstructured) bool { return true })
}

// dpWorkGone waits until the binding's Work on cluster is gone, playing
// that cluster's agent (which releases the finalizer once the object is
// removed).
func dpWorkGone(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("Work of %s on %s gone", binding, cluster), func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(context.Background(), workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if w.DeletionTimestamp != nil && len(w.Finalizers) > 0 {
			w.Finalizers = nil
			_, _ = fc.WorkV1alpha1().Works(w.Namespace).Update(context.Background(), w, metav1.UpdateOptions{})
		}
		return false, nil
	})
}

// dpNoWork fails if the binding has a live Work on cluster.
func dpNoWork(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string) {
	t.Helper()
	w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(context.Background(), workobjects.WorkName(ns, binding), metav1.GetOptions{})
	if err == nil && w.DeletionTimestamp == nil {
		t.Fatalf("%s has a Work on %s", binding, cluster)
	}
}

// dpReportApplied writes what an agent writes after applying a Work of a
// ConfigMap or Secret: Applied for its current generation, Healthy.
func dpReportApplied(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string) {
	t.Helper()
	waitUntil(t, "status of "+binding+" on "+cluster+" written", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(context.Background(), workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		obj := manifestOf(t, cur)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Version: "v1", Kind: obj.GetKind(), Namespace: ns, Name: obj.GetName()},
			Health:     workv1alpha1.ResourceHealthy}}
		_, err = fc.WorkV1alpha1().Works(cur.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func dpBinding(t *testing.T, fc flotillaclient.Interface, ns, name string) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// dpPlaced waits until the binding is placed on exactly one cluster and
// returns it.
func dpPlaced(t *testing.T, fc flotillaclient.Interface, ns, name string, not string) string {
	t.Helper()
	var placed string
	waitUntil(t, name+" placed on one cluster other than "+not, func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil || len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name == not {
			return false, err
		}
		placed = rb.Spec.Clusters[0].Name
		return true, nil
	})
	return placed
}

func dpDataA(obj *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(obj.Object, "data", "a")
	return v
}

// A Deployment using a ConfigMap and a Secret (neither selected by any
// policy) with propagateDeps: both reach the cluster the Deployment runs on,
// and only that one, through placement-less bindings that list the
// Deployment's binding in requiredBy; an OverridePolicy changes the
// ConfigMap per cluster like any object. On failover (a NoExecute taint)
// they follow to the new cluster, and the old copy stays, even once the
// new Deployment reports Healthy, until the dependencies are applied there
// too; then the old cluster loses the Deployment and its dependencies.
// Turning propagateDeps off removes the dependencies' bindings and Works;
// on again brings them back; deleting the Deployment's template removes
// them again.
func TestDependenciesFollowTheWorkload(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := dpStartHub(t, "member1", "member2")
	ns := "default"
	dpCreate(t, ctx, fc, ns, "web-settings", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings"},"data":{"a":"plain"}}`)
	dpCreate(t, ctx, fc, ns, "web-creds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"web-creds"},"stringData":{"password":"s3cret"}}`)
	override := &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "web-settings", Namespace: ns},
		Spec: policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "web-settings"}},
			OverrideRules: []policyv1alpha1.RuleWithCluster{{
				TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}},
				Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{
					Path: "/data/a", Operator: policyv1alpha1.OverriderOpReplace, Value: apiextensionsv1.JSON{Raw: []byte(`"member2-value"`)}}}},
			}},
		}}
	if _, err := fc.PolicyV1alpha1().OverridePolicies(ns).Create(ctx, override, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := dpPolicy(ns, "web", "Deployment", "web", true, policyv1alpha1.Placement{
		ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}},
	})
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dpCreate(t, ctx, fc, ns, "web", dpWebManifest)

	const web, settings, creds = "web-deployment", "web-settings-configmap", "web-creds-secret"
	from := dpPlaced(t, fc, ns, web, "")
	to := map[string]string{"member1": "member2", "member2": "member1"}[from]
	wantData := map[string]string{"member1": "plain", "member2": "member2-value"}

	// The dependencies run where the Deployment runs, and nowhere else.
	waitWork(t, fc, from, ns, settings, func(o *unstructured.Unstructured) bool { return dpDataA(o) == wantData[from] })
	dpWorkExists(t, fc, from, ns, creds)
	dpNoWork(t, fc, to, ns, settings)
	dpNoWork(t, fc, to, ns, creds)
	for _, name := range []string{settings, creds} {
		rb := dpBinding(t, fc, ns, name)
		if rb.Spec.Placement != nil || len(rb.Spec.RequiredBy) != 1 || rb.Spec.RequiredBy[0].Name != web ||
			rb.Labels[workv1alpha1.LabelDependencyOnly] != "true" || metav1.GetControllerOf(rb) == nil || metav1.GetControllerOf(rb).Kind != "ResourceTemplate" {
			t.Fatalf("dependency binding %s: placement %v, requiredBy %+v, labels %v, owner %+v", name, rb.Spec.Placement, rb.Spec.RequiredBy, rb.Labels, metav1.GetControllerOf(rb))
		}
	}
	waitUntil(t, "the ConfigMap's template says it is propagated as a dependency", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web-settings", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(rt.Status.Conditions, workobjects.TemplateConditionPropagated)
		return c != nil && strings.Contains(c.Message, "propagated as a dependency of "+web), nil
	})
	waitUntil(t, "DependenciesResolved=True on the binding, mirrored on the template", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(dpBinding(t, fc, ns, web).Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved) &&
			meta.IsStatusConditionTrue(rt.Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved), nil
	})
	reportApplied(t, fc, dpWorkExists(t, fc, from, ns, web), 2)
	dpReportApplied(t, fc, from, ns, settings)
	dpReportApplied(t, fc, from, ns, creds)

	// Failover: the dependencies follow to the new cluster.
	sfTaint(t, ctx, fc, from, true)
	dpPlaced(t, fc, ns, web, from)
	waitWork(t, fc, to, ns, settings, func(o *unstructured.Unstructured) bool { return dpDataA(o) == wantData[to] })
	dpWorkExists(t, fc, to, ns, creds)
	// The new Deployment reports Healthy; its dependencies have not been
	// applied there yet: the old copy (and its dependencies) must stay.
	reportApplied(t, fc, dpWorkExists(t, fc, to, ns, web), 2)
	waitUntil(t, "the new copy reads Healthy for the current generation", func() (bool, error) {
		rb := dpBinding(t, fc, ns, web)
		for _, item := range rb.Status.AggregatedStatus {
			if item.ClusterName == to {
				return item.Applied && item.ObservedGeneration == rb.Generation && item.Health == workv1alpha1.ResourceHealthy &&
					rb.Status.SchedulerObservedGeneration == rb.Generation, nil
			}
		}
		return false, nil
	})
	for range 30 {
		rb := dpBinding(t, fc, ns, web)
		if len(rb.Spec.GracefulEvictionTasks) != 1 {
			t.Fatalf("the eviction task ended while the dependencies were not applied on %s: %+v", to, rb.Status.AggregatedStatus)
		}
		for _, b := range []string{web, settings, creds} {
			dpWorkExists(t, fc, from, ns, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dpReportApplied(t, fc, to, ns, settings)
	dpReportApplied(t, fc, to, ns, creds)
	waitUntil(t, "the eviction task ends once the dependencies are applied on "+to, func() (bool, error) {
		return len(dpBinding(t, fc, ns, web).Spec.GracefulEvictionTasks) == 0, nil
	})
	for _, b := range []string{web, settings, creds} {
		dpWorkGone(t, fc, from, ns, b)
	}
	dpWorkExists(t, fc, to, ns, settings)

	// propagateDeps off: the dependency-only bindings and their Works go.
	setPropagateDeps := func(on bool) {
		waitUntil(t, fmt.Sprintf("propagateDeps set to %v", on), func() (bool, error) {
			p, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			p.Spec.PropagateDeps = on
			_, err = fc.PolicyV1alpha1().PropagationPolicies(ns).Update(ctx, p, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}
	setPropagateDeps(false)
	for _, b := range []string{settings, creds} {
		dpWorkGone(t, fc, to, ns, b)
		waitUntil(t, "binding "+b+" deleted", func() (bool, error) {
			_, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, b, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	dpWorkExists(t, fc, to, ns, web)
	setPropagateDeps(true)
	dpWorkExists(t, fc, to, ns, settings)
	dpWorkExists(t, fc, to, ns, creds)

	// Deleting the Deployment's template removes its dependencies too.
	if err := fc.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{web, settings, creds} {
		dpWorkGone(t, fc, to, ns, b)
	}
	// The dependencies' templates stay: only what was propagated goes.
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web-settings", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A dependency that has a policy of its own keeps its own placement and
// binding: it only gains (and loses) the requiredBy entry.
func TestDependencyWithItsOwnPolicyKeepsIt(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := dpStartHub(t, "member1", "member2")
	ns := "default"
	dpCreate(t, ctx, fc, ns, "web-settings", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings"},"data":{"a":"plain"}}`)
	own := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "web-settings"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const settings = "web-settings-configmap"
	dpWorkExists(t, fc, "member1", ns, settings)
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, dpPolicy(ns, "web", "Deployment", "web", true,
		policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dpCreate(t, ctx, fc, ns, "web", strings.Replace(dpWebManifest, `"volumes":[{"name":"creds","secret":{"secretName":"web-creds"}}]`, `"volumes":[]`, 1))
	dpWorkExists(t, fc, "member2", ns, settings)
	rb := dpBinding(t, fc, ns, settings)
	if rb.Spec.Placement == nil || len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name != "member1" || rb.Labels[workobjects.LabelPropagationPolicyName] != "settings" {
		t.Fatalf("the dependency's own binding changed: placement %v, clusters %v, labels %v", rb.Spec.Placement, rb.Spec.Clusters, rb.Labels)
	}
	if err := fc.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dpWorkGone(t, fc, "member2", ns, settings)
	waitUntil(t, "requiredBy emptied", func() (bool, error) {
		return len(dpBinding(t, fc, ns, settings).Spec.RequiredBy) == 0, nil
	})
	dpWorkExists(t, fc, "member1", ns, settings)
}

// A dependency without a template is a DependenciesResolved=False condition
// on the binding and its template, with a Warning event naming it; the
// workload itself propagates. It resolves when the template appears.
func TestMissingDependencyResolvesWhenItsTemplateAppears(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := dpStartHub(t, "member1")
	ns := "default"
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, dpPolicy(ns, "web", "Deployment", "web", true,
		policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dpCreate(t, ctx, fc, ns, "web-creds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"web-creds"},"stringData":{"password":"s3cret"}}`)
	dpCreate(t, ctx, fc, ns, "web", dpWebManifest)
	const web = "web-deployment"
	dpWorkExists(t, fc, "member1", ns, web)
	dpWorkExists(t, fc, "member1", ns, "web-creds-secret")
	missing := func(c *metav1.Condition) bool {
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == workv1alpha1.BindingReasonDependencyMissing &&
			strings.Contains(c.Message, "ConfigMap web-settings") && !strings.Contains(c.Message, "web-creds")
	}
	waitUntil(t, "DependenciesResolved=False naming ConfigMap web-settings, on the binding and the template", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return missing(meta.FindStatusCondition(dpBinding(t, fc, ns, web).Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved)) &&
			missing(meta.FindStatusCondition(rt.Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved)), nil
	})
	waitUntil(t, "a Warning event names the missing ConfigMap", func() (bool, error) {
		events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Type == corev1.EventTypeWarning && e.Reason == "DependencyMissing" && strings.Contains(e.Message, "ConfigMap web-settings")
		}), nil
	})

	dpCreate(t, ctx, fc, ns, "web-settings", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings"},"data":{"a":"plain"}}`)
	dpWorkExists(t, fc, "member1", ns, "web-settings-configmap")
	waitUntil(t, "DependenciesResolved=True", func() (bool, error) {
		return meta.IsStatusConditionTrue(dpBinding(t, fc, ns, web).Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved), nil
	})
}

// A tenant cannot pull another namespace's object with propagateDeps: a
// Deployment of tenant-a that mounts Secret db-creds gets tenant-a's
// db-creds or nothing, never tenant-b's, not even through a tenant-a
// template that embeds tenant-b's Secret.
func TestDependenciesStayInTheirNamespace(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := dpStartHub(t, "member1")
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dpCreate(t, ctx, fc, "tenant-b", "db-creds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-creds"},"stringData":{"password":"b-only"}}`)
	// A tenant-a template embedding tenant-b's Secret is refused at the
	// door (and, were the admission policy missing, by the hub: see
	// dependencies.Resolve).
	if _, err := fc.WorkV1alpha1().ResourceTemplates("tenant-a").Create(ctx, rtOf("tenant-a", "steal",
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-creds","namespace":"tenant-b"},"stringData":{"password":"forged"}}`), metav1.CreateOptions{}); err == nil {
		t.Log("the admission policy let a template embed another namespace's object; the hub must still refuse it")
	}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("tenant-a").Create(ctx, dpPolicy("tenant-a", "thief", "Deployment", "thief", true,
		policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dpCreate(t, ctx, fc, "tenant-a", "thief", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"thief"},
"spec":{"replicas":1,"selector":{"matchLabels":{"app":"thief"}},"template":{"metadata":{"labels":{"app":"thief"}},
"spec":{"containers":[{"name":"c","image":"busybox"}],"volumes":[{"name":"s","secret":{"secretName":"db-creds"}}]}}}}`)
	dpWorkExists(t, fc, "member1", "tenant-a", "thief-deployment")
	waitUntil(t, "DependenciesResolved=False naming Secret db-creds", func() (bool, error) {
		c := meta.FindStatusCondition(dpBinding(t, fc, "tenant-a", "thief-deployment").Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "Secret db-creds"), nil
	})
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "db-creds-secret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a binding for Secret db-creds exists in %s (err %v)", ns, err)
		}
	}
	works, err := fc.WorkV1alpha1().Works("flotilla-es-member1").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range works.Items {
		if obj := manifestOf(t, &w); obj.GetKind() == "Secret" {
			t.Errorf("a Secret reached member1: %s/%s", obj.GetNamespace(), obj.GetName())
		}
	}
}

// dependentOverrides: the template waits (Propagated=False
// DependentOverridesMissing, no binding) until the named OverridePolicy
// exists, so the object never reaches a cluster without its overrides;
// then it propagates with them.
func TestDependentOverridesWaitForTheOverridePolicy(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := dpStartHub(t, "member1")
	ns := "default"
	policy := dpPolicy(ns, "nginx", "Deployment", "nginx", false,
		policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}})
	policy.Spec.DependentOverrides = []string{"nginx-image"}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dpCreate(t, ctx, fc, ns, "nginx", nginxManifest)
	waitUntil(t, "Propagated=False DependentOverridesMissing naming nginx-image", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(rt.Status.Conditions, workobjects.TemplateConditionPropagated)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == detector.ReasonDependentOverridesMissing &&
			strings.Contains(c.Message, "nginx-image"), nil
	})
	if _, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a binding exists while the dependent override is missing (err %v)", err)
	}
	override := &policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx-image", Namespace: ns},
		Spec: policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			OverrideRules: []policyv1alpha1.RuleWithCluster{{
				Overriders: policyv1alpha1.Overriders{ImageOverrider: []policyv1alpha1.ImageOverrider{
					{Component: policyv1alpha1.Registry, Operator: policyv1alpha1.OverriderOpAdd, Value: "registry.example.com"}}},
			}},
		}}
	if _, err := fc.PolicyV1alpha1().OverridePolicies(ns).Create(ctx, override, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitWork(t, fc, "member1", ns, "nginx-deployment", func(o *unstructured.Unstructured) bool {
		return imageOf(o) == "registry.example.com/nginx:1.27"
	})
	waitUntil(t, "Propagated=True", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(rt.Status.Conditions, workobjects.TemplateConditionPropagated), err
	})
}

// A ConfigMap referenced with optional: true is no missing dependency when
// it does not exist (the kubelet starts the pod without it), and is
// propagated once it does.
func TestOptionalDependencyMissingIsResolved(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := dpStartHub(t, "member1")
	ns := "default"
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, dpPolicy(ns, "opt", "Deployment", "opt", true,
		policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dpCreate(t, ctx, fc, ns, "opt", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"opt"},"spec":{"replicas":1,
 "selector":{"matchLabels":{"app":"opt"}},"template":{"metadata":{"labels":{"app":"opt"}},"spec":{
 "volumes":[{"name":"extra","configMap":{"name":"opt-extra","optional":true}}],
 "containers":[{"name":"c","image":"nginx"}]}}}}`)
	const b = "opt-deployment"
	dpWorkExists(t, fc, "member1", ns, b)
	waitUntil(t, "DependenciesResolved=True with the optional ConfigMap missing", func() (bool, error) {
		return meta.IsStatusConditionTrue(dpBinding(t, fc, ns, b).Status.Conditions, workv1alpha1.BindingConditionDependenciesResolved), nil
	})
	dpCreate(t, ctx, fc, ns, "opt-extra", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"opt-extra"},"data":{"a":"b"}}`)
	dpWorkExists(t, fc, "member1", ns, "opt-extra-configmap")
}
