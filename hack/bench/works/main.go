// Command works measures how fast the agent applies Works: it creates N Works
// in a cluster's hub namespace (each one ConfigMap, or one Deployment), at a
// given rate, and records for each the time from its Create call returning to
// the agent's Applied=True reaching a watch; then it prints p50/p90/p99/max
// and deletes the Works (and waits for the agent to release them).
//
//	go run ./hack/bench/works --kubeconfig ~/.kube/flotilla.config --context flotilla-hub \
//	  --cluster member1 --count 1000 --kind configmap --rate 50
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", benchutil.KubeconfigUsage)
	context_ := flag.String("context", "flotilla-hub", "hub context")
	cluster := flag.String("cluster", "member1", "member cluster whose agent applies the Works")
	count := flag.Int("count", 1000, "number of Works")
	kind := flag.String("kind", "configmap", "configmap or deployment")
	rate := flag.Float64("rate", 0, "Works created per second (0: as fast as the client allows, 200/s)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	keep := flag.Bool("keep", false, "keep the Works (delete them later with: kubectl delete works -n flotilla-es-<cluster> -l flotilla.io/bench)")
	flag.Parse()
	if err := run(*kubeconfig, *context_, *cluster, *count, *kind, *rate, *timeout, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, hubContext, cluster string, count int, kind string, rate float64, timeout time.Duration, keep bool) error {
	cfg, err := benchutil.HubConfig(kubeconfig, hubContext)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	client, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ns := "flotilla-es-" + cluster
	run := rand.String(5)
	selector := "flotilla.io/bench=" + run

	created := make([]time.Time, count)
	appliedAt := make([]time.Time, count)
	index := map[string]int{}
	var mu sync.Mutex
	w, err := client.WorkV1alpha1().Works(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := 0
		for ev := range w.ResultChan() {
			work, ok := ev.Object.(*workv1alpha1.Work)
			if !ok || ev.Type == watch.Deleted || !meta.IsStatusConditionTrue(work.Status.Conditions, workv1alpha1.WorkConditionApplied) {
				continue
			}
			now := time.Now()
			mu.Lock()
			i, ok := index[work.Name]
			if ok && appliedAt[i].IsZero() {
				appliedAt[i] = now
				seen++
			}
			mu.Unlock()
			if seen == count {
				return
			}
		}
	}()

	var limiter flowcontrol.RateLimiter
	if rate > 0 {
		limiter = flowcontrol.NewTokenBucketRateLimiter(float32(rate), 1)
	}
	start := time.Now()
	for i := range count {
		if limiter != nil {
			limiter.Accept()
		}
		name := fmt.Sprintf("bench-%s-%05d", run, i)
		mu.Lock()
		index[name] = i
		mu.Unlock()
		work := &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"flotilla.io/bench": run},
				// The hub creates Works with the finalizer (as the binding
				// controller will), so the agent writes only the status.
				Finalizers: []string{workv1alpha1.ExecutionFinalizer}},
			Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{manifest(kind, name)}}},
		}
		if _, err := client.WorkV1alpha1().Works(ns).Create(ctx, work, metav1.CreateOptions{}); err != nil {
			return err
		}
		mu.Lock()
		created[i] = time.Now()
		mu.Unlock()
	}
	createdIn := time.Since(start)
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("not every Work was applied within %s", timeout)
	}
	total := time.Since(start)
	w.Stop()

	latencies := make([]time.Duration, count)
	for i := range count {
		latencies[i] = max(appliedAt[i].Sub(created[i]), 0)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration {
		return latencies[min(int(float64(count)*p), count-1)].Round(time.Millisecond)
	}
	fmt.Printf("| %d × %s | rate %s | created in %s | all applied in %s | p50 %s | p90 %s | p99 %s | max %s |\n",
		count, kind, rateString(rate), createdIn.Round(time.Millisecond), total.Round(time.Millisecond),
		pct(0.50), pct(0.90), pct(0.99), latencies[count-1].Round(time.Millisecond))

	if keep {
		return nil
	}
	deleteStart := time.Now()
	if err := client.WorkV1alpha1().Works(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return err
	}
	for {
		list, err := client.WorkV1alpha1().Works(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			fmt.Printf("| deleting %d Works (agent removes the member objects, then the finalizers) | %s |\n", count, time.Since(deleteStart).Round(100*time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d Works still held by their finalizer after %s", len(list.Items), timeout)
		case <-time.After(time.Second):
		}
	}
}

func rateString(rate float64) string {
	if rate <= 0 {
		return "unpaced"
	}
	return fmt.Sprintf("%g/s", rate)
}

func manifest(kind, name string) workv1alpha1.Manifest {
	var obj map[string]any
	switch kind {
	case "deployment":
		obj = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": name, "namespace": "bench"},
			"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": name}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27"}}}}}}
	default:
		obj = map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "bench"}, "data": map[string]any{"key": name}}
	}
	raw, _ := json.Marshal(obj)
	return workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
}
