package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/failback"
)

// Failback against the real hub and apiserver. The members are simulated
// by fbRunMembers: like a real agent it applies a Work at once, reports a
// scale-down at once, and reports a scale-up (availableReplicas reaching
// the Work's replicas, Healthy) only after fbStartDelay, as pods take time
// to start. fbSampleAvailable sums availableReplicas over every Work in one
// consistent list, so a dip is seen even if it lasts a moment.

const fbStartDelay = 1500 * time.Millisecond

// fbStartHub starts the hub with fast cluster failover (not-ready ->
// NoExecute after 1 s, no tolerations) and clusters that do not need a
// Lease, registers clusters and runs their simulated agents.
func fbStartHub(t *testing.T, clusters ...string) (context.Context, flotillaclient.Interface, kubernetes.Interface) {
	t.Helper()
	env, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		o.ClusterMonitorPeriod = time.Second
		o.FailoverEvictionTimeout = time.Second
		o.DefaultNotReadyTolerationSeconds, o.DefaultUnreachableTolerationSeconds = 0, 0
	})
	createReadyClusters(t, ctx, fc, clusters...)
	fbRunMembers(ctx, fc, clusters)
	return ctx, fc, kubernetes.NewForConfigOrDie(env.Config)
}

// fbPropagate creates the seed's nginx policy (Divided, static weights
// member1:1 member2:2) with failback, selecting the Deployments named, and
// one 3-replica nginx template per name.
func fbPropagate(t *testing.T, ctx context.Context, fc flotillaclient.Interface, window, maxConcurrent int32, names ...string) {
	t.Helper()
	var selectors []policyv1alpha1.ResourceSelector
	for _, n := range names {
		selectors = append(selectors, policyv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: n})
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx-failback", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: selectors,
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 2},
					}},
				},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Failback: &policyv1alpha1.FailbackBehavior{
				StabilizationWindowSeconds: window, MaxConcurrent: maxConcurrent}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		manifest := strings.Replace(nginxManifest, `"metadata":{"name":"nginx"`, fmt.Sprintf(`"metadata":{"name":%q`, n), 1)
		if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", n, manifest), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func fbBindingName(deployment string) string { return deployment + "-deployment" }

// fbManifest reads a Work's first manifest without a *testing.T (the
// simulated members run in their own goroutine).
func fbManifest(w *workv1alpha1.Work) (*unstructured.Unstructured, bool) {
	if len(w.Spec.Workload.Manifests) == 0 {
		return nil, false
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
		return nil, false
	}
	return obj, true
}

// fbAvailable is the availableReplicas a Work's status reports, and
// whether it reports for the Work's current generation.
func fbAvailable(w *workv1alpha1.Work) (int64, bool) {
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
	current := applied != nil && applied.ObservedGeneration == w.Generation
	if len(w.Status.ManifestStatuses) == 0 || w.Status.ManifestStatuses[0].Status == nil {
		return 0, current
	}
	var st struct {
		AvailableReplicas int64 `json:"availableReplicas"`
	}
	_ = json.Unmarshal(w.Status.ManifestStatuses[0].Status.Raw, &st)
	return st.AvailableReplicas, current
}

// fbRunMembers plays the clusters' agents until ctx ends.
func fbRunMembers(ctx context.Context, fc flotillaclient.Interface, clusters []string) {
	type seen struct {
		generation int64
		at         time.Time
	}
	first := map[types.UID]seen{}
	go func() {
		for ctx.Err() == nil {
			for _, cluster := range clusters {
				list, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).List(ctx, metav1.ListOptions{})
				if err != nil {
					continue
				}
				for i := range list.Items {
					w := &list.Items[i]
					if w.DeletionTimestamp != nil {
						// The agent deletes the member objects, then lets go.
						w.Finalizers = nil
						_, _ = fc.WorkV1alpha1().Works(w.Namespace).Update(ctx, w, metav1.UpdateOptions{})
						continue
					}
					obj, ok := fbManifest(w)
					if !ok {
						continue
					}
					if s, ok := first[w.UID]; !ok || s.generation != w.Generation {
						first[w.UID] = seen{generation: w.Generation, at: time.Now()}
					}
					want := replicasOf(obj)
					have, current := fbAvailable(w)
					next := have
					if want <= have || time.Since(first[w.UID].at) >= fbStartDelay {
						next = want
					}
					if current && next == have {
						continue
					}
					health := workv1alpha1.ResourceHealthy
					if next < want {
						health = workv1alpha1.ResourceUnhealthy
					}
					status := fmt.Sprintf(`{"replicas":%d,"readyReplicas":%d,"availableReplicas":%d,"updatedReplicas":%d}`, want, next, next, want)
					meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
						Reason: "Applied", Message: "applied", ObservedGeneration: w.Generation})
					w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
						Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: obj.GetNamespace(), Name: obj.GetName()},
						Status:     &runtime.RawExtension{Raw: []byte(status)}, Health: health}}
					_, _ = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// fbSampler records, from one consistent list of every Work, the lowest
// sum of availableReplicas per Deployment, from Start until Stop.
type fbSampler struct {
	mu   sync.Mutex
	min  map[string]int64
	stop chan struct{}
	done chan struct{}
}

func fbStartSampler(ctx context.Context, fc flotillaclient.Interface) *fbSampler {
	s := &fbSampler{min: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			list, err := fc.WorkV1alpha1().Works("").List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			sums := map[string]int64{}
			for i := range list.Items {
				w := &list.Items[i]
				obj, ok := fbManifest(w)
				if !ok {
					continue
				}
				if _, ok := sums[obj.GetName()]; !ok {
					sums[obj.GetName()] = 0
				}
				if w.DeletionTimestamp == nil {
					n, _ := fbAvailable(w)
					sums[obj.GetName()] += n
				}
			}
			s.mu.Lock()
			for name, n := range sums {
				if m, ok := s.min[name]; !ok || n < m {
					s.min[name] = n
				}
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *fbSampler) Stop() map[string]int64 {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.min
}

// fbWaitAvailable waits until every Deployment named has want replicas
// available in total and nothing is being evicted.
func fbWaitSettled(t *testing.T, fc flotillaclient.Interface, want map[string]int32, deployments ...string) {
	t.Helper()
	for _, d := range deployments {
		waitReplicas(t, fc, "default", fbBindingName(d), want)
		waitUntil(t, d+" settled", func() (bool, error) {
			rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(context.Background(), fbBindingName(d), metav1.GetOptions{})
			if err != nil || len(rb.Spec.GracefulEvictionTasks) > 0 {
				return false, err
			}
			list, err := fc.WorkV1alpha1().Works("").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			var sum int64
			works := 0
			for i := range list.Items {
				w := &list.Items[i]
				if obj, ok := fbManifest(w); ok && obj.GetName() == d {
					works++
					n, current := fbAvailable(w)
					if !current || w.DeletionTimestamp != nil {
						return false, nil
					}
					sum += n
				}
			}
			return works == len(want) && sum == 3, nil
		})
	}
}

func fbSetReady(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name string, status metav1.ConditionStatus) time.Time {
	t.Helper()
	c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setClusterReady(t, ctx, fc, c, status)
	c, err = fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady).LastTransitionTime.Time
}

// fbWaitTaint waits until the hub has (or has removed) the not-ready
// NoExecute taint on the cluster.
func fbWaitTaint(t *testing.T, fc flotillaclient.Interface, name string, present bool) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("not-ready NoExecute taint on %s present=%v", name, present), func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		has := false
		for _, taint := range c.Spec.Taints {
			if taint.Key == clusterv1alpha1.TaintClusterNotReady {
				has = true
			}
		}
		return has == present, nil
	})
}

func fbBinding(t *testing.T, fc flotillaclient.Interface, deployment string) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(context.Background(), fbBindingName(deployment), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

func fbFailedBack(rb *workv1alpha1.ResourceBinding) bool {
	return rb.Spec.RescheduleReason == workv1alpha1.EvictionReasonFailback && rb.Spec.RescheduleTriggeredAt != nil
}

// fbFailOverMember1 takes member1 down until the deployments run 3 on
// member2 and the old copies are gone.
func fbFailOverMember1(t *testing.T, ctx context.Context, fc flotillaclient.Interface, deployments ...string) {
	t.Helper()
	fbSetReady(t, ctx, fc, "member1", metav1.ConditionFalse)
	fbWaitTaint(t, fc, "member1", true)
	fbWaitSettled(t, fc, map[string]int32{"member2": 3}, deployments...)
}

func fbWaitEvent(t *testing.T, kube kubernetes.Interface, reason, substr string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("event %s %q", reason, substr), func() (bool, error) {
		list, err := kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, substr) {
				return true, nil
			}
		}
		return false, nil
	})
}

// The seed's nginx fails over from member1 (member2:3), member1 recovers,
// and after the stabilization window the placement is member1:1 member2:2
// again, with never fewer than 3 replicas available on the members in
// between, and not before the window has passed.
func TestFailbackReturnsToSplitWithoutDowntime(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fbStartHub(t, "member1", "member2")
	const window = 4
	fbPropagate(t, ctx, fc, window, 5, "nginx")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	fbFailOverMember1(t, ctx, fc, "nginx")
	if rb := fbBinding(t, fc, "nginx"); fbFailedBack(rb) {
		t.Fatalf("failed back before member1 recovered: %+v", rb.Spec)
	}

	sampler := fbStartSampler(ctx, fc)
	readyAt := fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	fbWaitTaint(t, fc, "member1", false)
	fbWaitEvent(t, kube, failback.EventFailbackStarted, "member1")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	min := sampler.Stop()

	rb := fbBinding(t, fc, "nginx")
	if !fbFailedBack(rb) {
		t.Fatalf("back at 1:2 without a failback: %+v", rb.Spec)
	}
	// The trigger is stored at one-second precision, rounded down.
	if earliest := readyAt.Add(window*time.Second - time.Second); rb.Spec.RescheduleTriggeredAt.Time.Before(earliest) {
		t.Errorf("failback at %s, before the window after member1's Ready at %s ended", rb.Spec.RescheduleTriggeredAt, readyAt)
	}
	for _, h := range rb.Spec.EvictionHistory {
		if h.ClusterName == "member1" {
			t.Errorf("member1's eviction history entry is still there: %+v", rb.Spec.EvictionHistory)
		}
	}
	if min["nginx"] < 3 {
		t.Fatalf("during the failback only %d replicas were available at one moment; want at least 3", min["nginx"])
	}

	// member1 fails again: normal failover, and no failback again before
	// member1 has been Ready for a new window.
	fbFailOverMember1(t, ctx, fc, "nginx")
	readyAt = fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	waitUntil(t, "second failback", func() (bool, error) {
		rb := fbBinding(t, fc, "nginx")
		return fbFailedBack(rb) && !rb.Spec.RescheduleTriggeredAt.Time.Before(readyAt.Add(-time.Second)), nil
	})
	if rb := fbBinding(t, fc, "nginx"); rb.Spec.RescheduleTriggeredAt.Time.Before(readyAt.Add(window*time.Second - time.Second)) {
		t.Errorf("second failback at %s, within the window after member1's Ready at %s", rb.Spec.RescheduleTriggeredAt, readyAt)
	}
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
}

// A cluster that flaps within the window restarts it each time: no
// failback while it flaps, one after it has held Ready for a window.
func TestFailbackWaitsWhileClusterFlaps(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := fbStartHub(t, "member1", "member2")
	const window = 5
	fbPropagate(t, ctx, fc, window, 5, "nginx")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	fbFailOverMember1(t, ctx, fc, "nginx")

	// Ready for about half the window, down until the hub taints it, four
	// times: more than a window in all, never a window at once.
	var readyAt time.Time
	for range 4 {
		readyAt = fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
		fbWaitTaint(t, fc, "member1", false)
		time.Sleep(window * time.Second / 2)
		if rb := fbBinding(t, fc, "nginx"); fbFailedBack(rb) {
			t.Fatalf("failed back while member1 flaps (Ready since %s): %+v", readyAt, rb.Spec)
		}
		fbSetReady(t, ctx, fc, "member1", metav1.ConditionFalse)
		fbWaitTaint(t, fc, "member1", true)
	}
	if rb := fbBinding(t, fc, "nginx"); fbFailedBack(rb) {
		t.Fatalf("failed back while member1 flaps: %+v", rb.Spec)
	}
	readyAt = fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	rb := fbBinding(t, fc, "nginx")
	if !fbFailedBack(rb) || rb.Spec.RescheduleTriggeredAt.Time.Before(readyAt.Add(window*time.Second-time.Second)) {
		t.Fatalf("failback %v (%s), want one at least a window after member1's last Ready at %s", rb.Spec.RescheduleTriggeredAt, rb.Spec.RescheduleReason, readyAt)
	}
}

// maxConcurrent 1 with two workloads due at once: they fail back one at
// a time (never two in progress), and both end at 1:2.
func TestFailbackMaxConcurrentOneAtATime(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fbStartHub(t, "member1", "member2")
	fbPropagate(t, ctx, fc, 3, 1, "nginx", "nginx2")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx", "nginx2")
	fbFailOverMember1(t, ctx, fc, "nginx", "nginx2")

	var mu sync.Mutex
	most, sawOne := 0, false
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			list, err := fc.WorkV1alpha1().ResourceBindings("default").List(sctx, metav1.ListOptions{})
			if err == nil {
				n := 0
				for i := range list.Items {
					if failback.InProgress(&list.Items[i].Spec, &list.Items[i].Status) {
						n++
					}
				}
				mu.Lock()
				most = max(most, n)
				sawOne = sawOne || n == 1
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	// Both fall due together: one waits for the other, and says so.
	fbWaitEvent(t, kube, failback.EventFailbackWaiting, "maxConcurrent 1")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx", "nginx2")
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if most > 1 {
		t.Fatalf("%d failbacks were in progress at once; maxConcurrent is 1", most)
	}
	if !sawOne {
		t.Fatal("the sampler never saw a failback in progress")
	}
	if !fbFailedBack(fbBinding(t, fc, "nginx")) || !fbFailedBack(fbBinding(t, fc, "nginx2")) {
		t.Fatalf("both workloads should have failed back")
	}
}

// No failback while the fleet guard sees a disruption (here: the region
// of member3, all of it down), one as soon as it is gone.
func TestFailbackHeldWhileFleetGuardSeesDisruption(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := fbStartHub(t, "member1", "member2", "member3")
	waitUntil(t, "member3 in region eu", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member3", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Spec.Region = "eu"
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	fbPropagate(t, ctx, fc, 2, 5, "nginx")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	fbFailOverMember1(t, ctx, fc, "nginx")

	fbSetReady(t, ctx, fc, "member3", metav1.ConditionFalse)
	fbWaitTaint(t, fc, "member3", true)
	fbSetReady(t, ctx, fc, "member1", metav1.ConditionTrue)
	// The event says the window has passed and the guard holds it.
	fbWaitEvent(t, kube, failback.EventFailbackWaiting, "fleet guard")
	time.Sleep(2 * time.Second)
	if rb := fbBinding(t, fc, "nginx"); fbFailedBack(rb) {
		t.Fatalf("failed back while region eu is down: %+v", rb.Spec)
	}

	fbSetReady(t, ctx, fc, "member3", metav1.ConditionTrue)
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	if rb := fbBinding(t, fc, "nginx"); !fbFailedBack(rb) {
		t.Fatalf("back at 1:2 without a failback: %+v", rb.Spec)
	}
}

// fbTaint adds or removes a NoExecute taint nothing tolerates, leaving
// Ready alone (maintenance), and returns when it was written.
func fbTaint(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string, add bool) time.Time {
	t.Helper()
	const key = "example.com/failback-maintenance"
	var at time.Time
	waitUntil(t, "maintenance taint on "+cluster+" changed", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var taints []corev1.Taint
		for _, taint := range c.Spec.Taints {
			if taint.Key != key {
				taints = append(taints, taint)
			}
		}
		if add {
			taints = append(taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Now()}})
		}
		c.Spec.Taints = taints
		at = time.Now()
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	return at
}

// A NoExecute taint (Ready stays True, so the Ready condition's
// lastTransitionTime is old) moves nginx to member2; the taint stays
// longer than the window; once it is removed the failback still waits a
// whole window, counted from the removal.
func TestFailbackAfterTaintWaitsFromItsRemoval(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := fbStartHub(t, "member1", "member2")
	const window = 4
	fbPropagate(t, ctx, fc, window, 5, "nginx")
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	fbTaint(t, ctx, fc, "member1", true)
	fbWaitSettled(t, fc, map[string]int32{"member2": 3}, "nginx")
	time.Sleep(window * time.Second)
	if rb := fbBinding(t, fc, "nginx"); fbFailedBack(rb) {
		t.Fatalf("failed back while member1 is tainted: %+v", rb.Spec)
	}
	sampler := fbStartSampler(ctx, fc)
	removed := fbTaint(t, ctx, fc, "member1", false)
	fbWaitSettled(t, fc, map[string]int32{"member1": 1, "member2": 2}, "nginx")
	min := sampler.Stop()
	rb := fbBinding(t, fc, "nginx")
	if !fbFailedBack(rb) || rb.Spec.RescheduleTriggeredAt.Time.Before(removed.Add(window*time.Second-time.Second)) {
		t.Fatalf("failback at %v (%s); want one at least a window after the taint went at %s", rb.Spec.RescheduleTriggeredAt, rb.Spec.RescheduleReason, removed)
	}
	if min["nginx"] < 3 {
		t.Fatalf("during the failback only %d replicas were available at one moment; want at least 3", min["nginx"])
	}
}
