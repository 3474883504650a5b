// Command clusters measures the hub with a simulated fleet: it registers N
// Clusters, renews their Leases every interval as their agents would (and
// reports them Ready once), measures the hub's CPU, memory and writes per
// second in the steady state from its /metrics, then stops renewing a share
// of the Leases and measures, for each, the time from the Lease's expiry
// (last renewal + grace) to Ready=Unknown arriving on a watch.
//
//	go run ./hack/bench/clusters --context flotilla-hub --hub-metrics 127.0.0.1:17001 --count 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", benchutil.KubeconfigUsage)
	hubContext := flag.String("context", "flotilla-hub", "hub context")
	hubMetrics := flag.String("hub-metrics", "127.0.0.1:17001", "host:port of the hub's /metrics")
	count := flag.Int("count", 1000, "clusters to simulate")
	stopShare := flag.Float64("stop", 0.1, "share of clusters whose Lease stops")
	interval := flag.Duration("renew-interval", 10*time.Second, "Lease renewal interval of the simulated agents")
	grace := flag.Duration("grace", 40*time.Second, "the hub's --cluster-monitor-grace-period")
	steady := flag.Duration("steady", 60*time.Second, "steady-state measuring window")
	flag.Parse()
	cfg, err := benchutil.HubConfig(*kubeconfig, *hubContext)
	if err == nil {
		err = run(cfg, *hubMetrics, *count, *stopShare, *interval, *grace, *steady)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(cfg *rest.Config, hubMetrics string, count int, stopShare float64, interval, grace, steady time.Duration) error {
	cfg.QPS, cfg.Burst = 500, 1000
	kube := kubernetes.NewForConfigOrDie(cfg)
	flotilla := flotillaclient.NewForConfigOrDie(cfg)
	ctx := context.Background()
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%04d", i)
	}

	start := time.Now()
	benchutil.Parallel(names, 20, func(name string) {
		_, _ = flotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"flotilla.io/bench": "clusters"}},
			Spec:       clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull, Region: "bench"}}, metav1.CreateOptions{})
	})
	// The simulated agents: like real ones, each renews its Lease as soon as
	// the hub has made it, and reports Ready True whenever the Cluster does
	// not say so (an agent writes its status when it differs).
	var mu sync.Mutex
	lastRenew := map[string]time.Time{}
	stops := map[string]context.CancelFunc{}
	for i, name := range names {
		rctx, stop := context.WithCancel(ctx)
		stops[name] = stop
		go func() {
			time.Sleep(time.Duration(i) * interval / time.Duration(count)) // spread the fleet over the interval
			framework.SimulateAgent(rctx, kube, flotilla, name, interval, func(at time.Time) {
				mu.Lock()
				lastRenew[name] = at
				mu.Unlock()
			})
		}()
	}

	fmt.Fprintf(os.Stderr, "created %d Clusters in %s; waiting for the hub to make their namespaces, Leases and identities…\n", count, time.Since(start).Round(time.Second))
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{LabelSelector: "cluster.flotilla.io/name"})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, l := range list.Items {
			if strings.HasPrefix(l.Name, "bench-") {
				n++
			}
		}
		return n == count, nil
	}); err != nil {
		return fmt.Errorf("the hub did not set up %d clusters: %w", count, err)
	}
	setup := time.Since(start)

	time.Sleep(2*interval + 5*time.Second) // settle: every Lease renewed, every cluster Ready, taints and guard quiet

	before, err := benchutil.Scrape(hubMetrics)
	if err != nil {
		return err
	}
	t0 := time.Now()
	time.Sleep(steady)
	after, err := benchutil.Scrape(hubMetrics)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	cpu := (after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]) / secs * 100
	writes := (after["writes"] - before["writes"]) / secs
	for k, v := range after {
		if strings.HasPrefix(k, "writes by ") && v > before[k] {
			fmt.Printf("steady-state %s: %.2f/s\n", k, (v-before[k])/secs)
		}
	}

	// Stop a share of the Leases and time expiry → Unknown.
	stopCount := int(float64(count) * stopShare)
	stopped := map[string]bool{}
	w, err := flotilla.ClusterV1alpha1().Clusters().Watch(ctx, metav1.ListOptions{LabelSelector: "flotilla.io/bench=clusters"})
	if err != nil {
		return err
	}
	for _, name := range names[:stopCount] {
		stops[name]()
		stopped[name] = true
	}
	stoppedAt := time.Now()
	latencies := []time.Duration{}
	timeout := time.After(grace + interval + time.Minute)
loop:
	for len(latencies) < stopCount {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				break loop
			}
			c, isCluster := ev.Object.(*clusterv1alpha1.Cluster)
			if !isCluster || ev.Type != watch.Modified || !stopped[c.Name] ||
				!meta.IsStatusConditionPresentAndEqual(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady, metav1.ConditionUnknown) {
				continue
			}
			now := time.Now()
			mu.Lock()
			expiry := lastRenew[c.Name].Add(grace)
			mu.Unlock()
			latencies = append(latencies, now.Sub(expiry))
			delete(stopped, c.Name)
		case <-timeout:
			break loop
		}
	}
	w.Stop()
	falseAlarms := 0
	list, _ := flotilla.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{LabelSelector: "flotilla.io/bench=clusters"})
	for _, c := range list.Items {
		if !strings.HasPrefix(c.Name, "bench-") {
			continue
		}
		idx, _ := strconv.Atoi(strings.TrimPrefix(c.Name, "bench-"))
		if idx >= stopCount && !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			falseAlarms++
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) string {
		if len(latencies) == 0 {
			return "n/a"
		}
		return latencies[min(int(float64(len(latencies))*p), len(latencies)-1)].Round(time.Millisecond).String()
	}
	fmt.Printf("| clusters | hub setup | hub CPU (steady) | hub RSS | hub writes/s (steady) | stopped | Unknown seen | expiry→Unknown p50 | p99 | max | false alarms |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %s | %.1f %% of a core | %.0f MiB | %.2f | %d | %d (within %s of the stop) | %s | %s | %s | %d |\n",
		count, setup.Round(time.Second), cpu, after["process_resident_memory_bytes"]/(1<<20), writes,
		stopCount, len(latencies), time.Since(stoppedAt).Round(time.Second), pct(0.5), pct(0.99), pct(1), falseAlarms)

	for _, stop := range stops {
		stop()
	}
	fmt.Fprintln(os.Stderr, "deleting the simulated Clusters (the hub tears down their namespaces)…")
	return flotilla.ClusterV1alpha1().Clusters().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "flotilla.io/bench=clusters"})
}
