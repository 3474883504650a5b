// Package benchutil holds what the benchmark commands share: the hub's
// client config, a worker pool and a /metrics scraper (simulated agents are
// framework.SimulateAgent, shared with the e2e specs).
package benchutil

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
)

// KubeconfigUsage is the help of the benchmarks' --kubeconfig flag.
const KubeconfigUsage = "kubeconfig with the hub context; empty means KUBECONFIG (all its files), then ~/.kube/config, as kubectl"

// HubConfig loads the hub context the way kubectl would: kubeconfig if
// given, else KUBECONFIG (which may list several files), else
// ~/.kube/config.
func HubConfig(kubeconfig, hubContext string) (*rest.Config, error) {
	return cmdutil.KubeconfigFlags{Kubeconfig: kubeconfig, Context: hubContext}.Load()
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

// Scrape reads the hub's CPU, memory and write requests (non-GET rest
// client requests, in total and by the hub's client) from its /metrics.
func Scrape(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads a process's CPU and memory, and a client-go process's
// write requests (as Scrape), from a /metrics body in the text format.
func ParseMetrics(body io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(body)
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

// LoadAverage returns the machine's 1, 5 and 15 minute load averages, or
// "unknown": the benchmarks print it before and after, since a shared
// machine skews their numbers.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// Deployment is the benchmarks' workload: a Deployment of replicas nginx
// Pods requesting 100m CPU and 64Mi each, labelled with its region (the
// label the benchmarks' policies select on). namespace "" leaves it out, as
// a template does.
func Deployment(name, region, namespace string, replicas int64) map[string]any {
	labels := map[string]any{"app": name}
	meta := map[string]any{"name": name, "labels": map[string]any{"app": name, "region": region}}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
		"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}}}}}}}}
}
