package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flotilla-io/flotilla/hub/app"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	bindingpkg "github.com/flotilla-io/flotilla/pkg/hub/binding"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// fakeAgents plays the members' agents for every Work of one binding: each
// Work is reported applied at its generation with the health health(cluster,
// image) gives, and every image a cluster was ever given is recorded.
type fakeAgents struct {
	mu     sync.Mutex
	health func(cluster, image string) workv1alpha1.ResourceHealth
	seen   map[string]map[string]bool // cluster → images its Work ever held
	first  map[string]map[string]time.Time
	// healthyAt: when a copy of the image was first reported Healthy.
	healthyAt map[string]map[string]time.Time
	// delay: a copy is reported only this long after its Work first held
	// its image (an agent's apply and a pod's start take time).
	delay time.Duration
}

func playAgents(t *testing.T, ctx context.Context, fc flotillaclient.Interface, clusters []string, ns, binding string,
	health func(cluster, image string) workv1alpha1.ResourceHealth) *fakeAgents {
	a := &fakeAgents{health: health, seen: map[string]map[string]bool{}, first: map[string]map[string]time.Time{},
		healthyAt: map[string]map[string]time.Time{}}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, cluster := range clusters {
			w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
			if err != nil {
				continue
			}
			img := imageOf(manifestOf(t, w))
			a.mu.Lock()
			if a.seen[cluster] == nil {
				a.seen[cluster] = map[string]bool{}
				a.first[cluster] = map[string]time.Time{}
			}
			if !a.seen[cluster][img] {
				a.first[cluster][img] = time.Now()
			}
			a.seen[cluster][img] = true
			h := a.health(cluster, img)
			early := time.Since(a.first[cluster][img]) < a.delay
			a.mu.Unlock()
			if early {
				continue
			}
			applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
			if applied != nil && applied.ObservedGeneration == w.Generation && len(w.Status.ManifestStatuses) > 0 && w.Status.ManifestStatuses[0].Health == h {
				continue
			}
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
				Reason: "Applied", Message: "applied", ObservedGeneration: w.Generation})
			w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
				Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "nginx"},
				Status:     &runtime.RawExtension{Raw: []byte(`{"replicas":1}`)}, Health: h}}
			if _, err := fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{}); err == nil && h == workv1alpha1.ResourceHealthy {
				a.mu.Lock()
				if a.healthyAt[cluster] == nil {
					a.healthyAt[cluster] = map[string]time.Time{}
				}
				if _, ok := a.healthyAt[cluster][img]; !ok {
					a.healthyAt[cluster][img] = time.Now()
				}
				a.mu.Unlock()
			}
		}
	}, 100*time.Millisecond)
	return a
}

// reportedHealthy is when cluster's copy of image was first reported
// Healthy (zero: never).
func (a *fakeAgents) reportedHealthy(cluster, image string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.healthyAt[cluster][image]
}

func (a *fakeAgents) ran(cluster, image string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[cluster][image]
}

// firstSaw is when cluster's Work was first seen holding image.
func (a *fakeAgents) firstSaw(cluster, image string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first[cluster][image]
}

func stagedPolicy(ns string, deadline time.Duration, rollback *policyv1alpha1.RolloutRollback) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
			RolloutStrategy: &policyv1alpha1.RolloutStrategy{Type: policyv1alpha1.RolloutTypeProgressivePerGroup,
				ProgressivePerGroup: &policyv1alpha1.RolloutProgressivePerGroup{
					RolloutConfig: policyv1alpha1.RolloutConfig{ProgressDeadline: &metav1.Duration{Duration: deadline}},
					DecisionGroups: []policyv1alpha1.RolloutGroup{{GroupName: "canary", GroupClusterSelector: policyv1alpha1.GroupClusterSelector{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}}}},
				Rollback: rollback},
		}}
}

func labelCluster(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name, key, value string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	if _, err := fc.ClusterV1alpha1().Clusters().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setImage(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns, name, image string) {
	t.Helper()
	waitUntil(t, "template image set to "+image, func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tmpl.Spec.Manifest.Raw = []byte(strings.Replace(nginxManifest, "nginx:1.27", image, 1))
		_, err = fc.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, tmpl, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func waitRollout(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns, binding, what string, ok func(*workv1alpha1.RolloutStatus) bool) *workv1alpha1.ResourceBinding {
	t.Helper()
	var rb *workv1alpha1.ResourceBinding
	defer func() {
		if t.Failed() && rb != nil {
			t.Logf("last rollout status: %+v", rb.Status.Rollout)
		}
	}()
	waitUntil(t, what, func() (bool, error) {
		got, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rb = got
		return got.Status.Rollout != nil && ok(got.Status.Rollout), nil
	})
	return rb
}

// The scenario against a real apiserver with the whole hub: a
// Duplicated Deployment on member1..3, staged canary (member1) then the
// rest, with automatic rollback. A new workload's first revision goes
// member1 first too. Then an edit whose copies never become Healthy
// halts after member1 — member2 and member3 never receive it — with
// RolloutHalted naming member1, an event, the template mirroring it; and
// member1 returns to the last completed revision. The next good edit
// rolls out again; a halted rollout without rollback leaves member1 on the
// bad revision and is resumed by the annotation.
func TestStagedRolloutHaltsAndRollsBack(t *testing.T) {
	t.Parallel()
	env, ctx, fc := startHubEnv(t, nil)
	clusters, ns := canaryFleet(t, ctx, fc, stagedPolicy("default", 3*time.Second, &policyv1alpha1.RolloutRollback{Type: policyv1alpha1.RollbackAll}))
	const binding = "nginx-deployment"
	agents := playAgents(t, ctx, fc, clusters, ns, binding, badImageUnhealthy)
	agents.mu.Lock()
	agents.delay = 700 * time.Millisecond
	agents.mu.Unlock()
	createNginx(t, ctx, fc, ns)
	rb := waitRollout(t, ctx, fc, ns, binding, "revision 1 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	if !meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha1.BindingConditionRolloutComplete) {
		t.Fatalf("conditions %+v, want RolloutComplete", rb.Status.Conditions)
	}
	for _, c := range clusters {
		w := waitWork(t, fc, c, ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:1.27" })
		if w.Annotations[workv1alpha1.AnnotationTemplateRevision] != "1" {
			t.Fatalf("%s's Work is annotated revision %q, want 1", c, w.Annotations[workv1alpha1.AnnotationTemplateRevision])
		}
	}
	// The new workload's first revision went to the canary first, not to
	// every cluster at once (its binding is synced before it is scheduled).
	canaryAt := agents.firstSaw("member1", "nginx:1.27")
	for _, c := range []string{"member2", "member3"} {
		// Not before the canary's copy was reported (700ms after its Work).
		if at := agents.firstSaw(c, "nginx:1.27"); at.Sub(canaryAt) < 600*time.Millisecond {
			t.Fatalf("%s had revision 1 at %s, the canary only at %s", c, at.Format(time.StampMilli), canaryAt.Format(time.StampMilli))
		}
	}

	// The bad edit.
	setImage(t, ctx, fc, ns, "nginx", "nginx:bad")
	waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:bad" })
	rb = waitRollout(t, ctx, fc, ns, binding, "revision 2 halted and rolled back", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && r.Phase == workv1alpha1.RolloutPhaseRolledBack
	})
	halted := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionRolloutHalted)
	if halted == nil || halted.Status != metav1.ConditionTrue || !strings.Contains(rb.Status.Rollout.Message, "member1") {
		t.Fatalf("RolloutHalted %+v, rollout message %q: want True naming member1", halted, rb.Status.Rollout.Message)
	}
	if rb.Status.Rollout.StableRevision != 1 {
		t.Fatalf("stable revision %d, want 1", rb.Status.Rollout.StableRevision)
	}
	w := waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:1.27" })
	if w.Annotations[workv1alpha1.AnnotationTemplateRevision] != "1" {
		t.Fatalf("member1 rolled back to revision %q, want 1", w.Annotations[workv1alpha1.AnnotationTemplateRevision])
	}
	for _, c := range []string{"member2", "member3"} {
		if agents.ran(c, "nginx:bad") {
			t.Fatalf("%s received the halted revision", c)
		}
	}
	waitUntil(t, "the template mirrors the halt", func() (bool, error) {
		got, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Rollout != nil && got.Status.Rollout.Phase == workv1alpha1.RolloutPhaseRolledBack &&
			meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionRolloutHalted), nil
	})
	waitBindingEvent(t, ctx, kubernetes.NewForConfigOrDie(env.Config), ns, binding, "RolloutHalted")

	// A good edit supersedes the halted one and completes.
	setImage(t, ctx, fc, ns, "nginx", "nginx:1.28")
	waitRollout(t, ctx, fc, ns, binding, "revision 3 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 3 && r.Phase == workv1alpha1.RolloutPhaseComplete && r.StableRevision == 3
	})
	for _, c := range clusters {
		waitWork(t, fc, c, ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:1.28" })
	}
	for _, c := range []string{"member2", "member3"} {
		if agents.ran(c, "nginx:bad") {
			t.Fatalf("%s received the halted revision", c)
		}
	}
}

// canaryFleet registers member1..3 Ready, member1 labelled ring=canary,
// and creates policy (in namespace default).
func canaryFleet(t *testing.T, ctx context.Context, fc flotillaclient.Interface, policy *policyv1alpha1.PropagationPolicy) ([]string, string) {
	t.Helper()
	clusters := []string{"member1", "member2", "member3"}
	createReadyClusters(t, ctx, fc, clusters...)
	labelCluster(t, ctx, fc, "member1", "ring", "canary")
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(policy.Namespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return clusters, policy.Namespace
}

// badImageUnhealthy is the members' health of a copy: Unhealthy for an
// image named bad, else Healthy.
func badImageUnhealthy(_, image string) workv1alpha1.ResourceHealth {
	if strings.Contains(image, "bad") {
		return workv1alpha1.ResourceUnhealthy
	}
	return workv1alpha1.ResourceHealthy
}

// createNginx creates the seed's nginx template in ns.
func createNginx(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns string) {
	t.Helper()
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(nginxManifest)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBindingEvent waits for an event of reason on the binding.
func waitBindingEvent(t *testing.T, ctx context.Context, kc kubernetes.Interface, ns, binding, reason string) {
	t.Helper()
	waitUntil(t, "event "+reason, func() (bool, error) {
		evs, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + binding + ",reason=" + reason})
		if err != nil {
			return false, nil
		}
		return len(evs.Items) > 0, nil
	})
}

// Rollouts agree with failover, against the whole hub: while revision 2 is
// in its canary (member1, Unhealthy, a long progressDeadline), a
// non-canary cluster fails; its workload fails over to member4 on the
// stable revision 1, never on revision 2; and application failover leaves
// the canary's Unhealthy copy to the rollout instead of carrying revision
// 2 elsewhere.
func TestRolloutAgreesWithFailover(t *testing.T) {
	t.Parallel()
	_, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.ClusterMonitorPeriod = time.Second
		o.FailoverEvictionTimeout = time.Second
		o.DefaultNotReadyTolerationSeconds, o.DefaultUnreachableTolerationSeconds = 0, 0
	})
	clusters := []string{"member1", "member2", "member3", "member4"}
	createReadyClusters(t, ctx, fc, clusters...)
	labelCluster(t, ctx, fc, "member1", "ring", "canary")
	ns := "default"
	const binding = "nginx-deployment"
	policy := stagedPolicy(ns, time.Hour, nil)
	policy.Spec.Placement.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 3, MinGroups: 3}}
	policy.Spec.Failover = &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
		DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](1)}}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agents := playAgents(t, ctx, fc, clusters, ns, binding, badImageUnhealthy)
	createNginx(t, ctx, fc, ns)
	rb := waitRollout(t, ctx, fc, ns, binding, "revision 1 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	var placed []string
	for _, c := range rb.Spec.Clusters {
		placed = append(placed, c.Name)
	}
	if strings.Join(placed, ",") != "member1,member2,member3" {
		t.Fatalf("scheduled on %v; the test expects member1..3 (the first three by name)", placed)
	}

	setImage(t, ctx, fc, ns, "nginx", "nginx:bad")
	waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:bad" })
	waitRollout(t, ctx, fc, ns, binding, "the canary Updating on revision 2", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && len(r.Clusters) > 0 && r.Clusters[0].ClusterName == "member1" && r.Clusters[0].Verdict == workv1alpha1.VerdictUpdating
	})

	// member2 (stable revision 1) fails.
	c2, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setClusterReady(t, ctx, fc, c2, metav1.ConditionFalse)
	w4 := waitWork(t, fc, "member4", ns, binding, func(*unstructured.Unstructured) bool { return true })
	if img := imageOf(manifestOf(t, w4)); img != "nginx:1.27" || w4.Annotations[workv1alpha1.AnnotationTemplateRevision] != "1" {
		t.Fatalf("the replacement on member4 runs %s (revision %q), want the stable nginx:1.27 (1)", img, w4.Annotations[workv1alpha1.AnnotationTemplateRevision])
	}
	rb = waitRollout(t, ctx, fc, ns, binding, "member4 pending in the rollout", func(r *workv1alpha1.RolloutStatus) bool {
		for _, c := range r.Clusters {
			if c.ClusterName == "member4" {
				return c.Verdict == workv1alpha1.VerdictPending && c.Revision == 1
			}
		}
		return false
	})
	// The canary's copy has been Unhealthy far longer than the
	// application failover toleration (1s): the rollout keeps it.
	if !slices.ContainsFunc(rb.Spec.Clusters, func(c workv1alpha1.TargetCluster) bool { return c.Name == "member1" }) {
		t.Fatalf("application failover moved the canary's copy of revision 2: clusters %+v", rb.Spec.Clusters)
	}
	for _, c := range []string{"member2", "member3", "member4"} {
		if agents.ran(c, "nginx:bad") {
			t.Fatalf("%s received revision 2 before its group was reached", c)
		}
	}
}

// Analyses gate groups against the real Prometheus (the hub's
// --rollout-prometheus-address), scraping this test's error-ratio gauge: a
// low ratio on the canary lets revision 1 through; a high one fails the
// analysis of revision 2, which halts and rolls back; a metric that is not
// there is inconclusive and pauses revision 3 until a person approves.
func TestRolloutAnalysisGatesGroups(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	ratio := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "app_error_ratio", Help: "errors per request"}, []string{"cluster"})
	reg.MustRegister(ratio)
	metricsSrv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(metricsSrv.Close)
	promAddr := testenv.StartPrometheus(t, strings.TrimPrefix(metricsSrv.URL, "http://"))
	_, ctx, fc := startHubEnv(t, func(o *app.Options) { o.RolloutPrometheusAddress = promAddr })
	clusters := []string{"member1", "member2"}
	createReadyClusters(t, ctx, fc, clusters...)
	labelCluster(t, ctx, fc, "member1", "ring", "canary")
	ns := "default"
	const binding = "nginx-deployment"
	policy := stagedPolicy(ns, time.Minute, &policyv1alpha1.RolloutRollback{})
	policy.Spec.RolloutStrategy.ProgressivePerGroup.DecisionGroups[0].Analysis = &policyv1alpha1.RolloutAnalysis{
		Prometheus:       policyv1alpha1.PrometheusAnalysis{Query: `max(app_error_ratio{cluster=~"{{clusters}}"})`},
		SuccessCondition: "result < 0.05", FailureCondition: "result >= 0.05",
		Interval: &metav1.Duration{Duration: time.Second}, Count: ptr.To[int32](2)}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agents := playAgents(t, ctx, fc, clusters, ns, binding, func(string, string) workv1alpha1.ResourceHealth { return workv1alpha1.ResourceHealthy })
	ratio.WithLabelValues("member1").Set(0.01)
	// A first measurement before the first scrape would be inconclusive.
	waitPrometheus(t, promAddr, `app_error_ratio{cluster="member1"}`, "0.01")
	createNginx(t, ctx, fc, ns)
	waitRollout(t, ctx, fc, ns, binding, "revision 1 through its analysis", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})

	ratio.WithLabelValues("member1").Set(0.5)
	waitPrometheus(t, promAddr, `app_error_ratio{cluster="member1"}`, "0.5")
	setImage(t, ctx, fc, ns, "nginx", "nginx:1.28")
	rb := waitRollout(t, ctx, fc, ns, binding, "revision 2's analysis failed and rolled back", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && r.Phase == workv1alpha1.RolloutPhaseRolledBack
	})
	if a := rb.Status.Rollout.Analysis; a == nil || a.Phase != workv1alpha1.AnalysisFailed || !strings.Contains(rb.Status.Rollout.Message, "its analysis failed") {
		t.Fatalf("rollout %+v: want the Failed analysis that halted it", rb.Status.Rollout)
	}
	if agents.ran("member2", "nginx:1.28") {
		t.Fatal("member2 received revision 2, whose canary analysis failed")
	}
	waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:1.27" })

	// No such series: inconclusive, never success; a person approves.
	ratio.DeleteLabelValues("member1")
	waitPrometheus(t, promAddr, `app_error_ratio{cluster="member1"}`, "")
	setImage(t, ctx, fc, ns, "nginx", "nginx:1.29")
	rb = waitRollout(t, ctx, fc, ns, binding, "revision 3 paused on an inconclusive analysis", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 3 && r.Phase == workv1alpha1.RolloutPhaseWaiting && r.Reason == "AnalysisInconclusive"
	})
	if !strings.Contains(rb.Status.Rollout.Message, "kubectl flotilla rollout approve nginx -n default --group canary") {
		t.Fatalf("message %q does not say how to go on", rb.Status.Rollout.Message)
	}
	if agents.ran("member2", "nginx:1.29") {
		t.Fatal("member2 received revision 3 while its canary analysis is inconclusive")
	}
	patch := []byte(`{"metadata":{"annotations":{"rollout.flotilla.io/approve":"3/canary"}}}`)
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Patch(ctx, "nginx", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, ctx, fc, ns, binding, "revision 3 complete once approved", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 3 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	waitWork(t, fc, "member2", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:1.29" })
}

// waitPrometheus waits until Prometheus answers query with want (the
// first sample's value; "" for no sample).
func waitPrometheus(t *testing.T, address, query, want string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("Prometheus answers %s with %q", query, want), func() (bool, error) {
		resp, err := http.Get(address + "/api/v1/query?query=" + url.QueryEscape(query))
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Result []struct {
					Value []any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return false, nil
		}
		got := ""
		if r := body.Data.Result; len(r) > 0 && len(r[0].Value) == 2 {
			got = fmt.Sprint(r[0].Value[1])
		}
		return got == want, nil
	})
}

// A ConfigMap a workload needs (propagateDeps), with no policy of its own,
// rolls in the workload's groups and is gated by the workload's health on
// each cluster: a change that makes the canary's workload Unhealthy halts
// there and rolls back, and the other clusters never receive it.
func TestDependencyRollsInItsWorkloadsGroups(t *testing.T) {
	t.Parallel()
	_, ctx, fc := startHubEnv(t, func(o *app.Options) { o.RolloutDependencyMinSuccessTime = 3 * time.Second })
	clusters := []string{"member1", "member2", "member3"}
	createReadyClusters(t, ctx, fc, clusters...)
	labelCluster(t, ctx, fc, "member1", "ring", "canary")
	ns := "default"
	const web, settings, creds = "web-deployment", "web-settings-configmap", "web-creds-secret"
	policy := stagedPolicy(ns, 3*time.Second, &policyv1alpha1.RolloutRollback{})
	policy.Spec.ResourceSelectors[0].Name = "web"
	policy.Spec.PropagateDeps = true
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // cluster → ConfigMap values it received
	mode := func(cluster string) string {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName(ns, settings), metav1.GetOptions{})
		if err != nil {
			return ""
		}
		v, _, _ := unstructured.NestedString(manifestOf(t, w).Object, "data", "a")
		return v
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, cluster := range clusters {
			m := mode(cluster)
			mu.Lock()
			if seen[cluster] == nil {
				seen[cluster] = map[string]bool{}
			}
			seen[cluster][m] = true
			mu.Unlock()
			for _, b := range []string{web, settings, creds} {
				w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(ctx, workobjects.WorkName(ns, b), metav1.GetOptions{})
				if err != nil {
					continue
				}
				h := workv1alpha1.ResourceHealthy
				if b == web && m == "bad" {
					h = workv1alpha1.ResourceUnhealthy // the workload reads the bad setting
				}
				applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
				if applied != nil && applied.ObservedGeneration == w.Generation && len(w.Status.ManifestStatuses) > 0 && w.Status.ManifestStatuses[0].Health == h {
					continue
				}
				obj := manifestOf(t, w)
				meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
					Reason: "Applied", Message: "applied", ObservedGeneration: w.Generation})
				gv := obj.GroupVersionKind()
				w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
					Identifier: workv1alpha1.ResourceIdentifier{Group: gv.Group, Version: gv.Version, Kind: gv.Kind, Namespace: ns, Name: obj.GetName()},
					Status:     &runtime.RawExtension{Raw: []byte(`{"replicas":2}`)}, Health: h}}
				_, _ = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
			}
		}
	}, 100*time.Millisecond)
	dpCreate(t, ctx, fc, ns, "web-settings", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings"},"data":{"a":"plain"}}`)
	dpCreate(t, ctx, fc, ns, "web-creds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"web-creds"},"data":{"p":"eA=="}}`)
	dpCreate(t, ctx, fc, ns, "web", dpWebManifest)
	for _, b := range []string{web, settings} {
		waitRollout(t, ctx, fc, ns, b, b+" revision 1 complete", func(r *workv1alpha1.RolloutStatus) bool {
			return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
		})
	}
	for _, c := range clusters {
		waitUntil(t, c+" has the plain settings", func() (bool, error) { return mode(c) == "plain", nil })
	}

	// The bad setting.
	waitUntil(t, "ConfigMap template changed", func() (bool, error) {
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web-settings", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tmpl.Spec.Manifest.Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-settings"},"data":{"a":"bad"}}`)
		_, err = fc.WorkV1alpha1().ResourceTemplates(ns).Update(ctx, tmpl, metav1.UpdateOptions{})
		return err == nil, nil
	})
	rb := waitRollout(t, ctx, fc, ns, settings, "the ConfigMap's revision 2 halted and rolled back", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && r.Phase == workv1alpha1.RolloutPhaseRolledBack
	})
	if !strings.Contains(rb.Status.Rollout.Message, "member1") {
		t.Fatalf("halt message %q does not name member1", rb.Status.Rollout.Message)
	}
	waitUntil(t, "member1 back on the plain settings", func() (bool, error) { return mode("member1") == "plain", nil })
	mu.Lock()
	defer mu.Unlock()
	if !seen["member1"]["bad"] {
		t.Fatal("the canary never received the change: the test proves nothing")
	}
	for _, c := range []string{"member2", "member3"} {
		if seen[c]["bad"] {
			t.Fatalf("%s received the ConfigMap change its group had not reached", c)
		}
	}
}

// The fleet guard holds staged rollouts: with two of three clusters not
// Ready (a partial disruption), a template change starts updating no
// cluster — the rollout waits with reason FleetGuardHolds and the lost
// clusters are reported Lost — and it goes on once the fleet is back.
func TestFleetGuardHoldsRollouts(t *testing.T) {
	t.Parallel()
	_, ctx, fc := startHubEnv(t, func(o *app.Options) {
		// Nothing is evicted during the test: only the hold is looked at.
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.FailoverEvictionTimeout = time.Hour
	})
	clusters, ns := canaryFleet(t, ctx, fc, stagedPolicy("default", time.Minute, nil))
	const binding = "nginx-deployment"
	agents := playAgents(t, ctx, fc, clusters, ns, binding, func(string, string) workv1alpha1.ResourceHealth { return workv1alpha1.ResourceHealthy })
	createNginx(t, ctx, fc, ns)
	waitRollout(t, ctx, fc, ns, binding, "revision 1 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	setReady := func(name string, s metav1.ConditionStatus) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setClusterReady(t, ctx, fc, c, s)
	}
	setReady("member2", metav1.ConditionFalse)
	setReady("member3", metav1.ConditionFalse)
	setImage(t, ctx, fc, ns, "nginx", "nginx:1.28")
	rb := waitRollout(t, ctx, fc, ns, binding, "revision 2 held by the fleet guard", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && r.Phase == workv1alpha1.RolloutPhaseWaiting && r.Reason == "FleetGuardHolds"
	})
	for _, c := range rb.Status.Rollout.Clusters {
		if (c.ClusterName == "member2" || c.ClusterName == "member3") && c.Verdict != workv1alpha1.VerdictLost {
			t.Fatalf("%s is %s, want Lost (not Ready): %+v", c.ClusterName, c.Verdict, rb.Status.Rollout.Clusters)
		}
	}
	if agents.ran("member1", "nginx:1.28") {
		t.Fatal("the canary started updating while the fleet guard sees a partial disruption")
	}
	setReady("member2", metav1.ConditionTrue)
	setReady("member3", metav1.ConditionTrue)
	waitRollout(t, ctx, fc, ns, binding, "revision 2 complete once the fleet is back", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
}

// Seeded random schedules of good and bad changes and a non-canary cluster
// going away and back, against the whole hub, checked after every step:
// no cluster outside the canary ever runs a bad revision; a good revision
// reaches the other clusters only after the canary reported it Healthy;
// a halted revision's canary returns to the last good one. A failure
// names the seed; FLOTILLA_ROLLOUT_SEED=N replays it.
func TestRolloutSchedulesOnTheHub(t *testing.T) {
	t.Parallel()
	seeds := []int64{1, 2}
	if v := os.Getenv("FLOTILLA_ROLLOUT_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []int64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			rolloutSchedule(t, seed)
		})
	}
}

func rolloutSchedule(t *testing.T, seed int64) {
	r := rand.New(rand.NewSource(seed))
	_, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.FailoverEvictionTimeout = time.Hour
	})
	clusters, ns := canaryFleet(t, ctx, fc, stagedPolicy("default", 2*time.Second, &policyv1alpha1.RolloutRollback{}))
	const binding = "nginx-deployment"
	agents := playAgents(t, ctx, fc, clusters, ns, binding, badImageUnhealthy)
	createNginx(t, ctx, fc, ns)
	revision, lastGood := int64(1), "nginx:1.27"
	var images []string
	var steps []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d after %v: %s (replay: FLOTILLA_ROLLOUT_SEED=%d go test ./hub/app -run TestRolloutSchedulesOnTheHub)",
			seed, steps, fmt.Sprintf(format, args...), seed)
	}
	settle := func() *workv1alpha1.RolloutStatus {
		t.Helper()
		rb := waitRollout(t, ctx, fc, ns, binding, fmt.Sprintf("seed %d: revision %d settled after %v", seed, revision, steps), func(r *workv1alpha1.RolloutStatus) bool {
			return r.Revision == revision && (r.Phase == workv1alpha1.RolloutPhaseComplete || r.Phase == workv1alpha1.RolloutPhaseRolledBack)
		})
		return rb.Status.Rollout
	}
	settle()
	member3Ready := true
	for i := 0; i < 6; i++ {
		switch x := r.Intn(5); {
		case x < 2:
			img := fmt.Sprintf("nginx:1.%d", 30+i)
			steps = append(steps, "good "+img)
			setImage(t, ctx, fc, ns, "nginx", img)
			revision++
			images = append(images, img)
			st := settle()
			if st.Phase != workv1alpha1.RolloutPhaseComplete {
				fail("good revision %d ended %s: %s", revision, st.Phase, st.Message)
			}
			lastGood = img
		case x < 4:
			img := fmt.Sprintf("nginx:bad%d", i)
			steps = append(steps, "bad "+img)
			setImage(t, ctx, fc, ns, "nginx", img)
			revision++
			images = append(images, img)
			if st := settle(); st.Phase != workv1alpha1.RolloutPhaseRolledBack {
				fail("bad revision %d ended %s", revision, st.Phase)
			}
			want := lastGood
			waitUntil(t, "the canary back on "+want, func() (bool, error) {
				w, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				return imageOf(manifestOf(t, w)) == want, nil
			})
		default:
			member3Ready = !member3Ready
			steps = append(steps, fmt.Sprintf("member3 Ready=%v", member3Ready))
			c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member3", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			status := metav1.ConditionTrue
			if !member3Ready {
				status = metav1.ConditionFalse
			}
			setClusterReady(t, ctx, fc, c, status)
		}
		// The invariants, over everything the members ever received.
		for _, img := range images {
			canaryHealthy := agents.reportedHealthy("member1", img)
			for _, c := range []string{"member2", "member3"} {
				if !agents.ran(c, img) {
					continue
				}
				if strings.Contains(img, "bad") {
					fail("%s received the bad %s", c, img)
				}
				if at := agents.firstSaw(c, img); canaryHealthy.IsZero() || !at.After(canaryHealthy) {
					fail("%s received %s at %s, before the canary reported it Healthy (%s)", c, img, at.Format(time.StampMilli), canaryHealthy.Format(time.StampMilli))
				}
			}
		}
	}
}

// A hub restarted mid-rollout goes on from the binding's status: the bad
// revision, in its canary when the hub stops, halts and rolls back under
// the new hub, and no other cluster ever receives it (the rollout's state
// — revisions, each cluster's update time, the stable revision — is in the
// API, not in the hub's memory).
func TestRolloutSurvivesHubRestart(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	tune := func(o *app.Options) {
		o.LeaderElection.LeaderElect = false
		o.BindingStatusHold = time.Second
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	}
	_, stop := runHub(t, env, tune)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	clusters, ns := canaryFleet(t, ctx, fc, stagedPolicy("default", 4*time.Second, &policyv1alpha1.RolloutRollback{}))
	const binding = "nginx-deployment"
	agentsCtx, stopAgents := context.WithCancel(ctx)
	t.Cleanup(stopAgents)
	agents := playAgents(t, agentsCtx, fc, clusters, ns, binding, badImageUnhealthy)
	createNginx(t, ctx, fc, ns)
	waitRollout(t, ctx, fc, ns, binding, "revision 1 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	setImage(t, ctx, fc, ns, "nginx", "nginx:bad")
	waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:bad" })
	stop()
	runHub(t, env, tune)
	rb := waitRollout(t, ctx, fc, ns, binding, "revision 2 rolled back under the new hub", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 2 && r.Phase == workv1alpha1.RolloutPhaseRolledBack
	})
	if rb.Status.Rollout.StableRevision != 1 {
		t.Fatalf("stable revision %d after the restart, want 1", rb.Status.Rollout.StableRevision)
	}
	waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:1.27" })
	for _, c := range []string{"member2", "member3"} {
		if agents.ran(c, "nginx:bad") {
			t.Fatalf("%s received the halted revision across the restart", c)
		}
	}
}

// Revisions deleted by hand (the ControllerRevisions in the hub's
// namespace) destroy nothing and are never renumbered: while revision 2 is
// in its canary, every revision is deleted; the hub records the template
// again as a new revision (3, never 1 again: a reused number would pass the
// bad change off as the stable revision), the clusters keep their Works as
// they were, and a new change rolls out as usual.
func TestDeletedRevisionsDestroyNothing(t *testing.T) {
	t.Parallel()
	env, ctx, fc := startHubEnv(t, nil)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	clusters, ns := canaryFleet(t, ctx, fc, stagedPolicy("default", time.Hour, nil))
	const binding = "nginx-deployment"
	agents := playAgents(t, ctx, fc, clusters, ns, binding, badImageUnhealthy)
	createNginx(t, ctx, fc, ns)
	waitRollout(t, ctx, fc, ns, binding, "revision 1 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 1 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	setImage(t, ctx, fc, ns, "nginx", "nginx:bad")
	waitWork(t, fc, "member1", ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:bad" })
	revs := kube.AppsV1().ControllerRevisions("flotilla-system")
	if err := revs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: bindingpkg.LabelRevisionBinding}); err != nil {
		t.Fatal(err)
	}
	// Any change of the binding brings it back: the agents' next report.
	rb := waitRollout(t, ctx, fc, ns, binding, "the template recorded again as revision 3", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 3
	})
	if rb.Status.Rollout.StableRevision != 1 || rb.Status.Rollout.Phase == workv1alpha1.RolloutPhaseComplete {
		t.Fatalf("after the revisions went: %+v", rb.Status.Rollout)
	}
	for _, c := range []string{"member2", "member3"} {
		w := waitWork(t, fc, c, ns, binding, func(*unstructured.Unstructured) bool { return true })
		if w.DeletionTimestamp != nil || imageOf(manifestOf(t, w)) != "nginx:1.27" {
			t.Fatalf("%s's Work changed after the revisions went: %s, deleting=%v", c, imageOf(manifestOf(t, w)), w.DeletionTimestamp != nil)
		}
		if agents.ran(c, "nginx:bad") {
			t.Fatalf("%s received the bad change after its revisions were deleted", c)
		}
	}
	setImage(t, ctx, fc, ns, "nginx", "nginx:1.28")
	waitRollout(t, ctx, fc, ns, binding, "revision 4 complete", func(r *workv1alpha1.RolloutStatus) bool {
		return r.Revision == 4 && r.Phase == workv1alpha1.RolloutPhaseComplete
	})
	for _, c := range clusters {
		waitWork(t, fc, c, ns, binding, func(o *unstructured.Unstructured) bool { return imageOf(o) == "nginx:1.28" })
	}
}
