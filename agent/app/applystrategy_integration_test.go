package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	hubapp "github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Issue 18 item 3: a policy's applyStrategy and conflictResolution reach
// the member, end to end — the real hub (detector, scheduler, binding
// controller) on one apiserver, the real agent applying to a member
// apiserver. Helpers are prefixed as to stay clear of other files.

// asStartHub runs the whole hub against the fleet's hub apiserver until
// the test ends.
func (f *fleet) asStartHub(t *testing.T) {
	t.Helper()
	opts := hubapp.NewOptions()
	opts.Kubeconfig = f.hubKubeconfig
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := hubapp.Run(ctx, opts); err != nil {
			t.Errorf("hub: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// asPropagate creates, on the hub, the template of obj in ns and a policy
// placing it on the fleet's member with spec tuned by tune.
func (f *fleet) asPropagate(t *testing.T, ns string, obj map[string]any, tune func(*policyv1alpha1.PropagationSpec)) {
	t.Helper()
	ctx := context.Background()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	md := obj["metadata"].(map[string]any)
	name, kind, apiVersion := md["name"].(string), obj["kind"].(string), obj["apiVersion"].(string)
	spec := policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: apiVersion, Kind: kind, Name: name}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{f.clusterName}}},
	}
	tune(&spec)
	mustCreate(t, func() error {
		_, err := f.hubFlotilla.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind + "-" + name), Namespace: ns}, Spec: spec}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := f.hubFlotilla.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, &workv1alpha1.ResourceTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind + "-" + name), Namespace: ns},
			Spec:       workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}, metav1.CreateOptions{})
		return err
	})
}

// asWork is the member's Work of the binding of kind/name in ns, or nil.
func (f *fleet) asWork(t *testing.T, ns, kind, name string) *workv1alpha1.Work {
	t.Helper()
	w, err := f.hubFlotilla.WorkV1alpha1().Works(f.clusterNamespace).Get(context.Background(),
		workobjects.WorkName(ns, workobjects.BindingName(kind, name)), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// asAppliedCurrent: the agent has reported the Work's current generation
// with Applied of the given status.
func asAppliedCurrent(w *workv1alpha1.Work, status metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
	return c != nil && c.Status == status && c.ObservedGeneration == w.Generation
}

func TestPolicyApplyStrategyAndConflictResolutionReachTheMember(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ctx := context.Background()
	const ns = "shop"
	mustCreate(t, func() error {
		_, err := f.hub.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := f.member.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	// Objects already on the member, not Flotilla's: a Deployment (with a
	// status, as its controller would write) for ReadOnly, ConfigMaps for
	// Overwrite and Abort.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "legacy"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "legacy"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "legacy:1"}}}}}}
	created, err := f.member.Kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = appsv1.DeploymentStatus{ObservedGeneration: created.Generation, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2}
	if _, err := f.member.Kube.AppsV1().Deployments(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"adopt-me", "leave-me"} {
		mustCreate(t, func() error {
			_, err := f.member.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
				Data: map[string]string{"owner": "someone-else"}}, metav1.CreateOptions{})
			return err
		})
	}

	f.startAgent(t)
	f.asStartHub(t)

	// CreateOnly: created, then left alone.
	f.asPropagate(t, ns, configMap(ns, "settings", map[string]any{"mode": "blue"}), func(s *policyv1alpha1.PropagationSpec) {
		s.ApplyStrategy = policyv1alpha1.ApplyStrategyCreateOnly
	})
	// ReadOnly: nothing written; the existing object's status reported.
	f.asPropagate(t, ns, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "legacy", "namespace": ns},
		"spec": map[string]any{"replicas": 5, "selector": map[string]any{"matchLabels": map[string]any{"app": "legacy"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "legacy"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "hub:2"}}}}}},
		func(s *policyv1alpha1.PropagationSpec) { s.ApplyStrategy = policyv1alpha1.ApplyStrategyReadOnly })
	// Overwrite adopts an unmanaged object; Abort (the default) leaves one.
	f.asPropagate(t, ns, configMap(ns, "adopt-me", map[string]any{"owner": "flotilla"}), func(s *policyv1alpha1.PropagationSpec) {
		s.ConflictResolution = policyv1alpha1.ConflictOverwrite
	})
	f.asPropagate(t, ns, configMap(ns, "leave-me", map[string]any{"owner": "flotilla"}), func(*policyv1alpha1.PropagationSpec) {})

	// CreateOnly.
	poll(t, 60*time.Second, "CreateOnly: the ConfigMap created", func() bool {
		cm := f.memberConfigMap(t, ns, "settings")
		return cm != nil && cm.Data["mode"] == "blue"
	})
	if w := f.asWork(t, ns, "ConfigMap", "settings"); w.Spec.ApplyStrategy != policyv1alpha1.ApplyStrategyCreateOnly {
		t.Fatalf("Work applyStrategy %q, want CreateOnly", w.Spec.ApplyStrategy)
	}
	cm := f.memberConfigMap(t, ns, "settings")
	cm.Data["mode"] = "green" // a member-side edit
	if _, err := f.member.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(configMap(ns, "settings", map[string]any{"mode": "red"}))
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tmpl, err := f.hubFlotilla.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "configmap-settings", metav1.GetOptions{})
		if err != nil {
			return err
		}
		tmpl.Spec.Manifest.Raw = raw
		_, err = f.hubFlotilla.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, tmpl, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "CreateOnly: the template change reaches the Work and the agent reports it", func() bool {
		w := f.asWork(t, ns, "ConfigMap", "settings")
		return w != nil && strings.Contains(string(w.Spec.Workload.Manifests[0].Raw), `"red"`) && asAppliedCurrent(w, metav1.ConditionTrue)
	})
	if cm := f.memberConfigMap(t, ns, "settings"); cm.Data["mode"] != "green" {
		t.Errorf("CreateOnly: the member-side edit was overwritten: mode %q, want green", cm.Data["mode"])
	}

	// ReadOnly.
	poll(t, 60*time.Second, "ReadOnly: the existing Deployment's status reported on the binding", func() bool {
		rb, err := f.hubFlotilla.WorkV1alpha1().ResourceBindings(ns).Get(ctx, workobjects.BindingName("Deployment", "legacy"), metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, it := range rb.Status.AggregatedStatus {
			if it.ClusterName == f.clusterName && it.Applied && it.Status != nil && strings.Contains(string(it.Status.Raw), `"availableReplicas":2`) {
				return true
			}
		}
		return false
	})
	if w := f.asWork(t, ns, "Deployment", "legacy"); w.Spec.ApplyStrategy != policyv1alpha1.ApplyStrategyReadOnly {
		t.Fatalf("Work applyStrategy %q, want ReadOnly", w.Spec.ApplyStrategy)
	}
	live, err := f.member.Kube.AppsV1().Deployments(ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *live.Spec.Replicas != 2 || live.Spec.Template.Spec.Containers[0].Image != "legacy:1" || live.Labels[workv1alpha1.LabelManaged] != "" {
		t.Errorf("ReadOnly wrote to the member: replicas %d image %s labels %v", *live.Spec.Replicas, live.Spec.Template.Spec.Containers[0].Image, live.Labels)
	}

	// Overwrite and Abort.
	poll(t, 60*time.Second, "Overwrite: the unmanaged ConfigMap adopted", func() bool {
		cm := f.memberConfigMap(t, ns, "adopt-me")
		return cm.Data["owner"] == "flotilla" && cm.Labels[workv1alpha1.LabelManaged] == "true"
	})
	poll(t, 60*time.Second, "Abort: the Work reports the conflict", func() bool {
		w := f.asWork(t, ns, "ConfigMap", "leave-me")
		if w == nil {
			return false
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Conflict"
	})
	if cm := f.memberConfigMap(t, ns, "leave-me"); cm.Data["owner"] != "someone-else" || cm.Labels[workv1alpha1.LabelManaged] != "" {
		t.Errorf("Abort: the unmanaged ConfigMap was changed: %+v", cm)
	}
}
