// Package benchutil holds what the benchmark commands share: the hub's
// client config, a worker pool, simulated agents and a /metrics scraper.
package benchutil

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// HubConfig loads the hub context of kubeconfig.
func HubConfig(kubeconfig, hubContext string) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: hubContext}).ClientConfig()
}

// Parallel calls f for every name on workers goroutines.
func Parallel(names []string, workers int, f func(string)) {
	ch := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ch {
				f(n)
			}
		}()
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
}

// SimulateAgent does what a real agent does for the hub until ctx ends:
// renews the cluster's Lease every interval once the hub has made it, and
// reports Ready True whenever the Cluster does not say so. onRenew, if set,
// is told each renewal time.
func SimulateAgent(ctx context.Context, kube kubernetes.Interface, flotilla flotillaclient.Interface, name string,
	interval time.Duration, onRenew func(time.Time)) {
	leases := kube.CoordinationV1().Leases("flotilla-es-" + name)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return
		}
		now := time.Now()
		l.Spec.RenewTime = &metav1.MicroTime{Time: now}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return
		}
		if onRenew != nil {
			onRenew(now)
		}
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil || meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			return
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
			Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady, Message: "simulated"})
		_, _ = flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
	}, interval)
}

// Scrape reads the hub's CPU, memory and write requests (non-GET rest
// client requests, in total and by the hub's client) from its /metrics.
func Scrape(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "process_cpu_seconds_total "), strings.HasPrefix(line, "process_resident_memory_bytes "):
			out[fields[0]] = v
		case strings.HasPrefix(line, "rest_client_requests_total{") && !strings.Contains(line, `method="GET"`):
			out["writes"] += v
		case strings.HasPrefix(line, "flotilla_api_requests_total{") && !strings.Contains(line, `method="GET"`):
			if _, rest, ok := strings.Cut(line, `client="`); ok {
				client, _, _ := strings.Cut(rest, `"`)
				out["writes by "+client] += v
			}
		}
	}
	return out, sc.Err()
}
