package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/detector"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// TestPolicyClaimsAndPreemption: Karmada's claiming rules with the whole hub
// running (issue 31 item 1). Each step names the Karmada e2e test it
// mirrors (test/e2e/suites/base/preemption_test.go, "[Preemption]
// propagation policy preemption testing").
//
//   - nginx, claimed by PropagationPolicy low (member1) and running there,
//     is NOT moved by a new higher-priority PropagationPolicy high (member2)
//     without preemption: the template says PreemptionBlocked
//     (ClaimedByOtherPolicy), once, in a condition and an event on the
//     template and on high, and re-syncs add no events;
//   - "High-priority PropagationPolicy preempts low-priority
//     PropagationPolicy": with preemption Always, high takes it, and the
//     move is graceful (member1 stays in a graceful eviction task, its Work
//     untouched, until member2 is healthy);
//   - "...Delete the high-priority PropagationPolicy to let the
//     low-priority PropagationPolicy preempt": low claims it again, again
//     gracefully;
//   - "PropagationPolicy preempts ClusterPropagationPolicy": web, claimed by
//     ClusterPropagationPolicy fleet, is not taken by a namespaced policy
//     without preemption, and is with it.
func TestPolicyClaimsAndPreemption(t *testing.T) {
	t.Parallel()
	env, ctx, fc := startHubEnv(t, nil)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	createReadyClusters(t, ctx, fc, "member1", "member2")
	ns := "default"

	pp := func(name string, priority int32, preemption policyv1alpha1.PreemptionBehavior, object, cluster string) *policyv1alpha1.PropagationPolicy {
		return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{Priority: ptr.To(priority), Preemption: preemption,
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: object}},
				Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{cluster}}}}}
	}
	create := func(p *policyv1alpha1.PropagationPolicy) {
		t.Helper()
		if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// nginx runs on member1 under low.
	create(pp("low", 5, "", "nginx", "member1"))
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimWaitPlaced(t, fc, "nginx", "low", "member1")
	claimReportHealthy(t, fc, "member1", "nginx")

	// A higher-priority policy with the default preemption (Never) does not
	// take it, and says why.
	create(pp("high", 10, "", "nginx", "member2"))
	blocked := claimWaitBlocked(t, fc, "nginx", detector.ReasonClaimedByOtherPolicy)
	for _, want := range []string{"PropagationPolicy default/high (priority 10)", "claimed by PropagationPolicy default/low (priority 5)", "preemption: Always"} {
		if !strings.Contains(blocked.Message, want) {
			t.Errorf("PreemptionBlocked message %q does not say %q", blocked.Message, want)
		}
	}
	rb := claimBinding(t, fc, "nginx")
	if got := claimClusters(rb); got != "member1" || rb.Labels[workobjects.LabelPropagationPolicyName] != "low" || len(rb.Spec.GracefulEvictionTasks) != 0 {
		t.Fatalf("after high (Never) appeared: binding on %q, claimed by %q, tasks %v; want member1, low, none",
			got, rb.Labels[workobjects.LabelPropagationPolicyName], rb.Spec.GracefulEvictionTasks)
	}
	tmplEvents := claimWaitEvents(t, kube, "ResourceTemplate", "nginx", detector.ReasonClaimedByOtherPolicy, 1)
	policyEvents := claimWaitEvents(t, kube, "PropagationPolicy", "high", detector.ReasonClaimedByOtherPolicy, 1)

	// A re-sync (a template spec change) neither moves it nor repeats the
	// event (counted below, once a later event shows the recorder has
	// written what this sync recorded).
	claimBumpTemplate(t, ctx, fc, "nginx")
	if got := claimClusters(claimBinding(t, fc, "nginx")); got != "member1" {
		t.Fatalf("after a re-sync the binding is on %q, want member1", got)
	}

	// preemption: Always: high takes it; member1 keeps its copy until
	// member2 is healthy.
	claimSetPreemption(t, ctx, fc, "high", policyv1alpha1.PreemptAlways)
	claimWaitGracefulMove(t, fc, "nginx", "high", "member1", "member2")
	claimWaitEvents(t, kube, "ResourceTemplate", "nginx", detector.EventPreemptPolicySucceed, 1)
	if got := claimCountEvents(t, kube, "ResourceTemplate", "nginx", detector.ReasonClaimedByOtherPolicy); got != tmplEvents {
		t.Errorf("%d ClaimedByOtherPolicy events on the template after a re-sync, want %d", got, tmplEvents)
	}
	if got := claimCountEvents(t, kube, "PropagationPolicy", "high", detector.ReasonClaimedByOtherPolicy); got != policyEvents {
		t.Errorf("%d ClaimedByOtherPolicy events on the policy after a re-sync, want %d", got, policyEvents)
	}

	// Deleting high hands nginx back to low, again gracefully.
	if err := fc.PolicyV1alpha1().PropagationPolicies(ns).Delete(ctx, "high", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	claimWaitGracefulMove(t, fc, "nginx", "low", "member2", "member1")
	claimWaitEvents(t, kube, "ResourceTemplate", "nginx", detector.EventClaimReleased, 1)

	// A ClusterPropagationPolicy's claim is not taken by a namespaced
	// policy without preemption.
	fleet := &policyv1alpha1.ClusterPropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fleet"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}}}}
	if _, err := fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, fleet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webManifest := strings.ReplaceAll(nginxManifest, `"name":"nginx","labels"`, `"name":"web","labels"`)
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "web", webManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimWaitPlaced(t, fc, "web", "fleet", "member1")
	claimReportHealthy(t, fc, "member1", "web")
	create(pp("team", 0, policyv1alpha1.PreemptNever, "web", "member2"))
	blocked = claimWaitBlocked(t, fc, "web", detector.ReasonClaimedByOtherPolicy)
	if !strings.Contains(blocked.Message, "claimed by ClusterPropagationPolicy fleet") {
		t.Errorf("PreemptionBlocked message %q does not name the ClusterPropagationPolicy", blocked.Message)
	}
	if rb := claimBinding(t, fc, "web"); claimClusters(rb) != "member1" || rb.Labels[workobjects.LabelClusterPropagationPolicyName] != "fleet" {
		t.Fatalf("web moved to %q (labels %v) without preemption", claimClusters(rb), rb.Labels)
	}
	claimSetPreemption(t, ctx, fc, "team", policyv1alpha1.PreemptAlways)
	claimWaitGracefulMove(t, fc, "web", "team", "member1", "member2")
	if tmpl, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if c := meta.FindStatusCondition(tmpl.Status.Conditions, workobjects.TemplateConditionPreemptionBlocked); c != nil {
		t.Errorf("web still shows %+v after team took it", c)
	}

	// Ported from Karmada (hub wrap --from-karmada keeps the claim labels
	// Karmada put on the object): api stays with the ClusterPropagationPolicy
	// that claimed it there, although a PropagationPolicy would win it
	// unclaimed.
	ported := fleet.DeepCopy()
	ported.ObjectMeta = metav1.ObjectMeta{Name: "ported"}
	ported.Spec.ResourceSelectors[0].Name = "api"
	if _, err := fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, ported, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(pp("api-team", 0, "", "api", "member2"))
	apiManifest := strings.ReplaceAll(nginxManifest, `"name":"nginx","labels":{"app":"nginx"}`,
		`"name":"api","labels":{"app":"nginx","`+workobjects.LabelClusterPropagationPolicyName+`":"ported"}`)
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "api", apiManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimWaitPlaced(t, fc, "api", "ported", "member1")
	claimWaitBlocked(t, fc, "api", detector.ReasonClaimedByOtherPolicy)
}

func claimBinding(t *testing.T, fc flotillaclient.Interface, name string) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(context.Background(), name+"-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

func claimClusters(rb *workv1alpha1.ResourceBinding) string {
	var names []string
	for _, c := range rb.Spec.Clusters {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

// claimPolicyOf is the policy a binding's labels name.
func claimPolicyOf(rb *workv1alpha1.ResourceBinding) string {
	if n := rb.Labels[workobjects.LabelClusterPropagationPolicyName]; n != "" {
		return n
	}
	return rb.Labels[workobjects.LabelPropagationPolicyName]
}

// claimWaitPlaced waits for the template's binding to be claimed by policy
// and placed on cluster alone.
func claimWaitPlaced(t *testing.T, fc flotillaclient.Interface, name, policy, cluster string) {
	t.Helper()
	waitUntil(t, name+" claimed by "+policy+" on "+cluster, func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(context.Background(), name+"-deployment", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && claimPolicyOf(rb) == policy && claimClusters(rb) == cluster, err
	})
}

// claimReportHealthy plays cluster's agent: the template's Work there is
// applied and healthy.
func claimReportHealthy(t *testing.T, fc flotillaclient.Interface, cluster, name string) {
	t.Helper()
	w := waitWork(t, fc, cluster, "default", name+"-deployment", func(*unstructured.Unstructured) bool { return true })
	waitUntil(t, "Work status on "+cluster+" written", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works(w.Namespace).Get(context.Background(), w.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "default", Name: name},
			Status:     &runtime.RawExtension{Raw: []byte(`{"replicas":3,"readyReplicas":3,"availableReplicas":3,"updatedReplicas":3}`)},
			Health:     workv1alpha1.ResourceHealthy}}
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func claimWaitBlocked(t *testing.T, fc flotillaclient.Interface, name, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	waitUntil(t, name+" PreemptionBlocked "+reason, func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(tmpl.Status.Conditions, workobjects.TemplateConditionPreemptionBlocked)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			return false, nil
		}
		got = *c
		return true, nil
	})
	return got
}

// claimEvents are the events of reason on the object of kind and name
// (in default: a cluster-scoped object's events go there too).
func claimEvents(kube kubernetes.Interface, kind, name, reason string) ([]corev1.Event, error) {
	list, err := kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "involvedObject.kind": kind, "reason": reason}.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// claimCountEvents counts them, with the recorder's repeats.
func claimCountEvents(t *testing.T, kube kubernetes.Interface, kind, name, reason string) int {
	t.Helper()
	events, err := claimEvents(kube, kind, name, reason)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		n += int(max(e.Count, 1))
	}
	return n
}

// claimWaitEvents waits for exactly want events (with repeats) and returns
// the count.
func claimWaitEvents(t *testing.T, kube kubernetes.Interface, kind, name, reason string, want int) int {
	t.Helper()
	var n int
	waitUntil(t, fmt.Sprintf("%d %s event(s) on %s %s", want, reason, kind, name), func() (bool, error) {
		n = claimCountEvents(t, kube, kind, name, reason)
		if n > want {
			return false, fmt.Errorf("%d %s events on %s %s, want %d", n, reason, kind, name, want)
		}
		return n == want, nil
	})
	return n
}

// claimBumpTemplate changes the template's spec (its image) and waits for
// the detector to have synced it (observedGeneration).
func claimBumpTemplate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name string) {
	t.Helper()
	var generation int64
	waitUntil(t, name+" image changed", func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tmpl.Spec.Manifest.Raw = []byte(strings.Replace(string(tmpl.Spec.Manifest.Raw), `"image":"nginx:1.27"`, `"image":"nginx:1.28"`, 1))
		updated, err := fc.WorkV1alpha1().ResourceTemplates("default").Update(ctx, tmpl, metav1.UpdateOptions{})
		if err == nil {
			generation = updated.Generation
		}
		return err == nil, nil
	})
	waitUntil(t, name+" synced at its new generation", func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(tmpl.Status.Conditions, workobjects.TemplateConditionPreemptionBlocked)
		return tmpl.Status.ObservedGeneration == generation && c != nil && c.ObservedGeneration == generation, nil
	})
}

func claimSetPreemption(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name string, preemption policyv1alpha1.PreemptionBehavior) {
	t.Helper()
	waitUntil(t, name+" preemption "+string(preemption), func() (bool, error) {
		p, err := fc.PolicyV1alpha1().PropagationPolicies("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		p.Spec.Preemption = preemption
		_, err = fc.PolicyV1alpha1().PropagationPolicies("default").Update(ctx, p, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// claimWaitGracefulMove waits for the template to be claimed by policy and
// placed on to, checks that from stays in a graceful eviction task with
// its Work untouched while to is not healthy, then plays to's agent and
// waits for the task to end and from's Work to go.
func claimWaitGracefulMove(t *testing.T, fc flotillaclient.Interface, name, policy, from, to string) {
	t.Helper()
	claimWaitPlaced(t, fc, name, policy, to)
	rb := claimBinding(t, fc, name)
	hasTask := false
	for _, task := range rb.Spec.GracefulEvictionTasks {
		hasTask = hasTask || task.FromCluster == from
	}
	if !hasTask {
		t.Fatalf("%s moved from %s to %s without a graceful eviction task for %s: tasks %+v", name, from, to, from, rb.Spec.GracefulEvictionTasks)
	}
	old, err := fc.WorkV1alpha1().Works("flotilla-es-"+from).Get(context.Background(), workobjects.WorkName("default", name+"-deployment"), metav1.GetOptions{})
	if err != nil || old.DeletionTimestamp != nil {
		t.Fatalf("%s's Work on %s is gone or going (%v) while its graceful task is open", name, from, err)
	}
	claimReportHealthy(t, fc, to, name)
	waitUntil(t, name+": the task for "+from+" ends and its Work goes", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(context.Background(), name+"-deployment", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, task := range rb.Spec.GracefulEvictionTasks {
			if task.FromCluster == from {
				return false, nil
			}
		}
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+from).Get(context.Background(), workobjects.WorkName("default", name+"-deployment"), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && w.DeletionTimestamp != nil, err
	})
	// The test plays the agent: release the old Work so the cluster is
	// empty for the next move.
	w, err := fc.WorkV1alpha1().Works("flotilla-es-"+from).Get(context.Background(), workobjects.WorkName("default", name+"-deployment"), metav1.GetOptions{})
	if err == nil && len(w.Finalizers) > 0 {
		w.Finalizers = nil
		if _, err := fc.WorkV1alpha1().Works(w.Namespace).Update(context.Background(), w, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}
