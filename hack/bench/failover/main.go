// Command failover measures cluster failover end to end on a `make up`
// environment: the seed's nginx (3 replicas, member1:member2 = 1:2); every
// agent of member1 is killed (the hub stops hearing from it) and the time
// until member2 runs all 3 replicas Available is measured: detection (kill →
// Ready not True on the hub, the lease grace) and, step by step, the chain
// after it (steps in trace.go), each mark the arrival of the change on a
// watch of the object (Cluster, binding, member2's Work, member2's
// Deployment), not a poll. With each failover it counts the apiserver
// requests made: the hub's flotilla_api_requests_total by client and verb
// (from just before the kill; the hub's leader-election lease left out) and
// member2's agents' rest_client_requests_total to the hub and to member2
// (from detection), up to 3/3 available and again --settle later (the
// statuses and the graceful eviction's end written after it). Then member1's
// agents are started again, the workload deleted, and the next run begins.
// After the runs it measures the floor: one write to the hub's (and
// member2's) apiserver and its arrival on a watch, --floor times.
// Run the hub with the benchmark's timings:
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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

const (
	ns      = "bench-failover"
	binding = "nginx-deployment"
)

func main() {
	state := flag.String("state", ".local", "state directory of the `make up` environment")
	runs := flag.Int("runs", 10, "failovers to measure")
	settle := flag.Duration("settle", 3*time.Second, "how long after 3/3 available the requests are counted again (statuses, the graceful eviction's end)")
	flag.BoolVar(&jsonRuns, "json", false, "also print each run as one JSON line (\"json {...}\") on stderr, for combining runs of several invocations")
	flag.BoolVar(&showTimeline, "timeline", false, "print every change of the watched objects from detection on, with who wrote it")
	floorRuns := flag.Int("floor", 20, "single writes to time on the hub's and member2's apiserver after the runs (0: none)")
	flag.Parse()
	env, err := framework.LoadEnvironment(filepath.Join(*state, "environment"))
	if err == nil {
		err = run(env, *runs, *settle, *floorRuns)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

var showTimeline, jsonRuns bool

// result is one failover.
type result struct {
	detection time.Duration // kill → detected
	steps     map[string]time.Duration
	// hub and agent requests up to 3/3 available, and up to settled.
	hub, agents, hubSettled, agentsSettled requests
}

func run(env *framework.Environment, runs int, settle time.Duration, floorRuns int) error {
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
	m2cfg, err := env.RestConfig(m2.Context)
	if err != nil {
		return err
	}
	member2, err := env.Kube(m2.Context)
	if err != nil {
		return err
	}
	cnt := counters{hub: env.HubMetrics, agents: m2.AgentMetrics,
		hosts: map[string]string{hostOf(cfg.Host): "agent→hub", hostOf(m2cfg.Host): "agent→member"}}
	if _, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	fmt.Printf("load average before: %s\n", benchutil.LoadAverage())
	var results []result
	for i := range runs {
		r, err := once(ctx, env, fc, member2, m1, m2, cnt, settle)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "run %d: detection %s", i+1, ms(r.detection))
		for _, s := range steps[1:] {
			fmt.Fprintf(os.Stderr, " %s %s", s.name, ms(r.steps[s.name]))
		}
		fmt.Fprintf(os.Stderr, " | after detection %s\n", ms(r.steps["after detection"]))
		if jsonRuns {
			out := map[string]any{"detection": r.detection.Seconds(), "hub": r.hub, "agents": r.agents,
				"hubSettled": r.hubSettled, "agentsSettled": r.agentsSettled}
			stepsOut := map[string]float64{}
			for k, v := range r.steps {
				stepsOut[k] = v.Seconds()
			}
			out["steps"] = stepsOut
			b, _ := json.Marshal(out)
			fmt.Fprintf(os.Stderr, "json %s\n", b)
		}
	}
	fmt.Printf("load average after the runs: %s\n", benchutil.LoadAverage())
	if len(results) > 0 {
		printResults(results)
	}
	if floorRuns > 0 {
		for _, f := range []struct {
			name string
			kube kubernetes.Interface
		}{{"hub", hub}, {"member2", member2}} {
			write, seen, err := floor(ctx, f.kube, floorRuns)
			if err != nil {
				return fmt.Errorf("floor on %s: %w", f.name, err)
			}
			fmt.Printf("floor, %s apiserver (%d ConfigMap updates): write returned %s, change on a watch %s\n", f.name, floorRuns, summary(write), summary(seen))
		}
		fmt.Printf("load average after the floor: %s\n", benchutil.LoadAverage())
	}
	return hub.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

func printResults(results []result) {
	collect := func(f func(result) time.Duration) []time.Duration {
		var l []time.Duration
		for _, r := range results {
			l = append(l, f(r))
		}
		return l
	}
	fmt.Printf("\n%d failovers, p50 (min–max):\n\n| step | after | what | time |\n|---|---|---|---|\n", len(results))
	fmt.Printf("| detection | kill | %s | %s |\n", steps[0].what, summary(collect(func(r result) time.Duration { return r.detection })))
	for _, s := range steps[1:] {
		fmt.Printf("| %s | %s | %s | %s |\n", s.name, s.after, s.what, summary(collect(func(r result) time.Duration { return r.steps[s.name] })))
	}
	fmt.Printf("| **after detection** | detected | → available | **%s** |\n", summary(collect(func(r result) time.Duration { return r.steps["after detection"] })))
	fmt.Printf("| total | kill | → available | %s |\n\n", summary(collect(func(r result) time.Duration { return r.detection + r.steps["after detection"] })))
	pick := func(f func(result) requests) []requests {
		var l []requests
		for _, r := range results {
			l = append(l, f(r))
		}
		return l
	}
	fmt.Printf("Hub requests, kill → 3/3 available:\n\n%s\n", requestTable(pick(func(r result) requests { return r.hub })))
	fmt.Printf("member2's agents' requests, detection → 3/3 available:\n\n%s\n", requestTable(pick(func(r result) requests { return r.agents })))
	fmt.Printf("Hub queues, kill → 3/3 available (medians over the runs):\n\n%s\n", queueTable(pick(func(r result) requests { return r.hub })))
	fmt.Printf("Hub requests, kill → settled:\n\n%s\n", requestTable(pick(func(r result) requests { return r.hubSettled })))
	fmt.Printf("member2's agents' requests, detection → settled:\n\n%s\n", requestTable(pick(func(r result) requests { return r.agentsSettled })))
}

// once runs one failover.
func once(ctx context.Context, env *framework.Environment, fc flotillaclient.Interface, member2 kubernetes.Interface, m1, m2 framework.Member, cnt counters, settle time.Duration) (result, error) {
	if err := create(ctx, fc, m1.Name, m2.Name); err != nil {
		return result{}, err
	}
	defer func() { _ = cleanup(ctx, fc) }()
	if err := poll(ctx, 90*time.Second, func() (bool, error) {
		d, err := member2.AppsV1().Deployments(ns).Get(ctx, "nginx", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2, nil
	}); err != nil {
		return result{}, fmt.Errorf("nginx not running: %w", err)
	}
	// The binding settles (statuses) before the watches start.
	time.Sleep(time.Second)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	rec := newRecorder()
	if err := watchChain(wctx, rec, fc, member2, m1.Name, m2.Name); err != nil {
		return result{}, err
	}
	hub0, _, _ := cnt.scrape()

	killed := time.Now()
	for _, a := range m1.Agents {
		if err := env.Ctl(ctx, "kill", a); err != nil {
			return result{}, err
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
	var agents0 requests
	deadline := time.After(5 * time.Minute)
	var m map[string]time.Time
	for {
		m = marks(rec.snapshot(), killed, m1.Name, m2.Name)
		if _, ok := m["detected"]; ok && agents0 == nil {
			_, agents0, _ = cnt.scrape()
		}
		if len(m) == len(steps) {
			break
		}
		select {
		case <-rec.notify:
		case <-deadline:
			return result{}, fmt.Errorf("failover did not complete (seen %v)", m)
		}
	}
	hub1, agents1, _ := cnt.scrape()
	if showTimeline {
		fmt.Fprint(os.Stderr, timeline(rec.snapshot(), m["detected"]))
	}
	time.Sleep(settle)
	hub2, agents2, _ := cnt.scrape()
	st, err := stepTimes(m)
	if err != nil {
		return result{}, err
	}
	return result{detection: m["detected"].Sub(killed), steps: st,
		hub: hub1.minus(hub0), agents: agents1.minus(agents0),
		hubSettled: hub2.minus(hub0), agentsSettled: agents2.minus(agents0)}, nil
}

// floor times n updates of one ConfigMap: until the write returns, and
// until a watch opened before it delivers the change — one apiserver round
// trip, the least each step of the chain costs.
func floor(ctx context.Context, kube kubernetes.Interface, n int) (write, seen []time.Duration, err error) {
	cms := kube.CoreV1().ConfigMaps("default")
	name := "flotilla-bench-floor"
	_ = cms.Delete(ctx, name, metav1.DeleteOptions{})
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": "0"}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = cms.Delete(ctx, name, metav1.DeleteOptions{}) }()
	w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cm.ResourceVersion})
	if err != nil {
		return nil, nil, err
	}
	defer w.Stop()
	for i := range n {
		cm.Data["i"] = fmt.Sprint(i + 1)
		start := time.Now()
		updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return nil, nil, err
		}
		write = append(write, time.Since(start))
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(*corev1.ConfigMap); ok && o.ResourceVersion == updated.ResourceVersion {
				seen = append(seen, time.Since(start))
				break
			}
		}
		if len(seen) != i+1 {
			return nil, nil, fmt.Errorf("watch closed")
		}
		cm = updated
		time.Sleep(50 * time.Millisecond)
	}
	return write, seen, nil
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
