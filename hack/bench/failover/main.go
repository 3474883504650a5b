// Command failover measures cluster failover end to end on a `make up`
// environment: the seed's nginx (3 replicas, member1:member2 = 1:2); every
// agent of member1 is killed (the hub stops hearing from it) and the time
// until member2 runs all 3 replicas Available is split into
//
//	detection  kill → Ready Unknown on the hub (lease grace)
//	eviction   Unknown → the binding's graceful eviction task (NoExecute
//	           timeout + toleration + taint manager)
//	scheduling task → spec.clusters member2(3)
//	apply      → member2's Work Applied for its new generation (agent)
//	readiness  → member2's Deployment 3/3 available (member controllers, kwok)
//
// then member1's agents are started again, the workload deleted, and the
// next run begins. Run the hub with the benchmark's timings:
//
//	make up HUB_FLAGS="--cluster-monitor-grace-period=10s --failover-eviction-timeout=1ms \
//	  --default-unreachable-toleration-seconds=0 --default-not-ready-toleration-seconds=0" \
//	  AGENT_FLAGS="--cluster-lease-duration=10s"   # agents renew every 2.5s
//	(--failover-eviction-timeout=0 would disable NoExecute taints altogether)
//	go run ./hack/bench/failover --runs 10
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/e2e/framework"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const (
	ns      = "bench-failover"
	binding = "nginx-deployment"
)

var phases = []string{"detection", "eviction", "scheduling", "apply", "readiness", "total"}

func main() {
	state := flag.String("state", ".local", "state directory of the `make up` environment")
	runs := flag.Int("runs", 10, "failovers to measure")
	flag.Parse()
	env, err := framework.LoadEnvironment(filepath.Join(*state, "environment"))
	if err == nil {
		err = run(env, *runs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(env *framework.Environment, runs int) error {
	ctx := context.Background()
	cfg, err := env.RestConfig(env.HubContext)
	if err != nil {
		return err
	}
	fc := flotillaclient.NewForConfigOrDie(cfg)
	hub, err := env.Kube(env.HubContext)
	if err != nil {
		return err
	}
	m1, m2 := env.Members[0], env.Members[1]
	member2, err := env.Kube(m2.Context)
	if err != nil {
		return err
	}
	if _, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	results := map[string][]time.Duration{}
	for i := range runs {
		r, err := once(ctx, env, fc, member2, m1, m2)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		fmt.Fprintf(os.Stderr, "run %d:", i+1)
		for _, p := range phases {
			results[p] = append(results[p], r[p])
			fmt.Fprintf(os.Stderr, " %s %s", p, r[p].Round(time.Millisecond))
		}
		fmt.Fprintln(os.Stderr)
	}
	fmt.Printf("| phase | p50 | p99 | max |\n|---|---|---|---|\n")
	for _, p := range phases {
		l := results[p]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		fmt.Printf("| %s | %s | %s | %s |\n", p, l[len(l)/2].Round(time.Millisecond), l[min(len(l)*99/100, len(l)-1)].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
	}
	return hub.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// once runs one failover and returns the phase durations.
func once(ctx context.Context, env *framework.Environment, fc flotillaclient.Interface, member2 kubernetes.Interface, m1, m2 framework.Member) (map[string]time.Duration, error) {
	if err := create(ctx, fc, m1.Name, m2.Name); err != nil {
		return nil, err
	}
	defer func() { _ = cleanup(ctx, fc) }()
	if err := poll(ctx, 90*time.Second, func() (bool, error) {
		d, err := member2.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2, nil
	}); err != nil {
		return nil, fmt.Errorf("nginx not running: %w", err)
	}

	killed := time.Now()
	for _, a := range m1.Agents {
		if err := env.Ctl(ctx, "kill", a); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, a := range m1.Agents {
			_ = env.Ctl(ctx, "start", a)
		}
		_ = poll(ctx, 2*time.Minute, func() (bool, error) {
			c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, m1.Name, metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) && len(c.Spec.Taints) == 0, nil
		})
	}()
	marks := map[string]time.Time{}
	mark := func(name string, ok bool) {
		if _, seen := marks[name]; ok && !seen {
			marks[name] = time.Now()
		}
	}
	err := poll(ctx, 5*time.Minute, func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, m1.Name, metav1.GetOptions{})
		if err == nil {
			mark("detection", !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady))
		}
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		if err == nil {
			mark("eviction", len(rb.Spec.EvictionHistory) > 0)
			mark("scheduling", len(rb.Spec.Clusters) == 1 && rb.Spec.Clusters[0].Name == m2.Name && rb.Spec.Clusters[0].Replicas == 3)
		}
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+m2.Name).Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if err == nil && hasReplicas(w, 3) {
			applied := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
			mark("apply", applied != nil && applied.Status == metav1.ConditionTrue && applied.ObservedGeneration == w.Generation)
		}
		d, err := member2.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err == nil {
			mark("readiness", d.Spec.Replicas != nil && *d.Spec.Replicas == 3 && d.Status.AvailableReplicas == 3 && d.Status.ObservedGeneration == d.Generation)
		}
		_, done := marks["readiness"]
		return done, nil
	})
	if err != nil {
		return nil, fmt.Errorf("failover did not complete (%v): %w", marks, err)
	}
	out := map[string]time.Duration{}
	prev := killed
	for _, p := range phases[:len(phases)-1] {
		at, ok := marks[p]
		if !ok || at.Before(prev) {
			at = prev // seen in the same poll as the phase before
		}
		out[p] = at.Sub(prev)
		prev = at
	}
	out["total"] = prev.Sub(killed)
	return out, nil
}

func hasReplicas(w *workv1alpha1.Work, n int64) bool {
	if len(w.Spec.Workload.Manifests) == 0 {
		return false
	}
	var m struct {
		Spec struct {
			Replicas int64 `json:"replicas"`
		} `json:"spec"`
	}
	return json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &m) == nil && m.Spec.Replicas == n
}

func create(ctx context.Context, fc flotillaclient.Interface, first, second string) error {
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "nginx", "labels": map[string]any{"app": "nginx"}},
		"spec": map[string]any{"replicas": 3, "selector": map[string]any{"matchLabels": map[string]any{"app": "nginx"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "nginx"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "nginx", "image": "nginx"}}}}}})
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{first, second}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{first}}, Weight: 1},
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{second}}, Weight: 2}}}}}}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: manifest}}}}
	_, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{})
	return err
}

// cleanup deletes the template and waits for its binding to be gone.
func cleanup(ctx context.Context, fc flotillaclient.Interface) error {
	_ = fc.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "nginx", metav1.DeleteOptions{})
	return poll(ctx, 3*time.Minute, func() (bool, error) {
		_, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond() })
}
