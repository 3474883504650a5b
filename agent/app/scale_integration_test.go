package app_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

var (
	scaleReport = flag.Bool("agent-scale-report", false, "run the agent-at-scale report (issue 20)")
	scaleWorks  = flag.Int("agent-scale-works", 5000, "Works in the agent's hub namespace in the scale report")
	scaleKind   = flag.String("agent-scale-kind", "configmap", "what each Work carries in the scale report: configmap or deployment")
	scaleFlags  = flag.String("agent-scale-flags", "", "extra agent flags in the scale report, space-separated (e.g. \"--concurrent-work-syncs=10\")")
	scaleBinary = flag.String("agent-scale-binary", "", "agent binary to measure (e.g. one built from another commit); default: build ./agent")
)

// TestAgentScaleReport measures the agent binary with N Works already in its
// hub namespace (two real apiservers: hub and member): the time to lead, to
// list the Works, and until every Work reports Applied for its generation;
// the Work status writes (its own metric) and requests to the member and the
// hub (rest_client_requests_total by host); its memory (VmRSS, VmHWM from
// /proc). Then it restarts the agent with everything applied and measures the
// same: a restart must neither rewrite unchanged statuses nor re-apply
// unchanged manifests. It asserts only that everything got applied and that
// the restart changed no Work; the numbers go in docs/benchmarks.md.
//
//	TESTENV_QUIET=1 KUBEBUILDER_ASSETS=$PWD/bin go test ./agent/app/ -run AgentScaleReport -v -timeout 30m \
//	  -agent-scale-report -agent-scale-works 5000 -agent-scale-kind configmap
func TestAgentScaleReport(t *testing.T) {
	if !*scaleReport {
		t.Skip("run with -agent-scale-report")
	}
	f := newFleet(t)
	f.register(t, "", true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := *scaleWorks
	if *scaleKind != "configmap" && *scaleKind != "deployment" {
		t.Fatalf("-agent-scale-kind %q: want configmap or deployment", *scaleKind)
	}

	// The Works exist before the agent starts, as after a failover onto a
	// fresh member or an agent upgrade.
	cfg := rest.CopyConfig(f.hub.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	fc := flotillaclient.NewForConfigOrDie(cfg)
	created := time.Now()
	scaleCreateWorks(t, fc, f.clusterNamespace, n, *scaleKind)
	t.Logf("created %d Works (%s) in %s", n, *scaleKind, time.Since(created).Round(time.Millisecond))

	// The test's own view of the Works: how many report Applied=True for
	// their current generation.
	factory := flotillainformers.NewSharedInformerFactoryWithOptions(fc, 0, flotillainformers.WithNamespace(f.clusterNamespace))
	var appliedCount atomic.Int64
	var appliedMu sync.Mutex
	applied := map[string]bool{}
	track := func(obj any) {
		w, ok := obj.(*workv1alpha1.Work)
		if !ok {
			return
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied)
		ok = c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation
		appliedMu.Lock()
		if ok != applied[w.Name] {
			applied[w.Name] = ok
			if ok {
				appliedCount.Add(1)
			} else {
				appliedCount.Add(-1)
			}
		}
		appliedMu.Unlock()
	}
	worksInformer := factory.Work().V1alpha1().Works().Informer()
	_, _ = worksInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: track, UpdateFunc: func(_, o any) { track(o) }})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	bin := *scaleBinary
	if bin == "" {
		bin = testenv.BuildBinary(t, "./agent")
	}
	hubHost, memberHost := scaleHost(t, f.hub.Config.Host), scaleHost(t, f.member.Config.Host)
	run := func(name string, done func(m scaleMetrics) bool) (scaleRun, map[string]string) {
		metricsAddr := testenv.FreeAddr(t)
		args := []string{"--cluster-name", f.clusterName, "--kubeconfig", f.memberKubeconfig, "--hub-kubeconfig", f.hubKubeconfig,
			"--node-name", "node-a", "--dns-server", f.dnsServer, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0"}
		args = append(args, strings.Fields(*scaleFlags)...)
		start := time.Now()
		proc := testenv.StartProcess(t, bin, args...)
		r := scaleRun{name: name}
		var last scaleMetrics
		quietSince := time.Time{}
		deadline := start.Add(20 * time.Minute)
		for time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			m, err := scrapeAgent(metricsAddr, hubHost, memberHost)
			if err != nil {
				continue
			}
			now := time.Since(start)
			if r.leader == 0 && m.leader == 1 {
				r.leader = now
			}
			if r.listed == 0 && scaleListed(proc.Output()) {
				r.listed = now
			}
			if r.done == 0 && done(m) {
				r.done = now
			}
			// Quiet: no more applies or Work status writes for 3s after
			// done (member writes never stop: leader election, DNS verdict).
			if m.applies != last.applies || m.statusWrites != last.statusWrites {
				quietSince = time.Now()
			}
			last = m
			if r.done != 0 && time.Since(quietSince) >= 3*time.Second {
				break
			}
		}
		if r.done == 0 {
			t.Fatalf("%s: not done within 20m: %+v", name, last)
		}
		r.m = last
		r.rss, r.hwm = procMemory(proc.Cmd.Process.Pid)
		rvs := map[string]string{}
		for _, obj := range worksInformer.GetStore().List() {
			w := obj.(*workv1alpha1.Work)
			rvs[w.Name] = w.ResourceVersion
		}
		if err := proc.Terminate(30 * time.Second); err != nil {
			t.Errorf("%s: agent did not stop cleanly: %v", name, err)
		}
		return r, rvs
	}

	first, before := run("first start", func(scaleMetrics) bool { return appliedCount.Load() >= int64(n) })
	// Every Work is applied: a restarted agent has nothing to write.
	second, after := run("restart, all applied", func(m scaleMetrics) bool { return m.applies >= float64(n) })
	changed := 0
	for name, rv := range after {
		if before[name] != rv {
			changed++
		}
	}

	t.Logf("agent with %d Works (%s), flags %q:", n, *scaleKind, *scaleFlags)
	t.Logf("| run | leader | Works listed | all reported | Work status writes | member writes | member GETs | hub writes | hub GETs | manifest outcomes | VmRSS | VmHWM |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range []scaleRun{first, second} {
		t.Logf("| %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %.1f MiB | %.1f MiB |", r.name,
			r.leader.Round(10*time.Millisecond), r.listed.Round(10*time.Millisecond), r.done.Round(10*time.Millisecond),
			r.m.statusWrites, r.m.memberWrites, r.m.memberGets, r.m.hubWrites, r.m.hubGets, r.m.outcomes(), r.rss, r.hwm)
	}
	t.Logf("Works changed on the hub by the restart: %d of %d", changed, len(after))
	if changed != 0 {
		t.Errorf("the restart changed %d Works that needed no change", changed)
	}
}

type scaleRun struct {
	name                 string
	leader, listed, done time.Duration
	m                    scaleMetrics
	rss, hwm             float64 // MiB
}

type scaleMetrics struct {
	leader                   float64
	applies                  float64
	byOutcome                map[string]float64
	statusWrites             float64
	memberWrites, memberGets float64
	hubWrites, hubGets       float64
	inFlight                 float64
}

func (m scaleMetrics) outcomes() string {
	var parts []string
	for _, o := range []string{"Created", "Applied", "Unchanged"} {
		if v := m.byOutcome[o]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", o, v))
		}
	}
	for o, v := range m.byOutcome {
		if o != "Created" && o != "Applied" && o != "Unchanged" && v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", o, v))
		}
	}
	return strings.Join(parts, ", ")
}

// scrapeAgent reads what the report needs from the agent's /metrics.
func scrapeAgent(addr, hubHost, memberHost string) (scaleMetrics, error) {
	_, body, err := testenv.HTTPGet(context.Background(), addr, "/metrics")
	if err != nil {
		return scaleMetrics{}, err
	}
	m := scaleMetrics{byOutcome: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		series := line[:i]
		switch {
		case series == "flotilla_agent_leader":
			m.leader = v
		case series == "flotilla_agent_works_in_flight":
			m.inFlight = v
		case strings.HasPrefix(series, "flotilla_agent_manifest_applies_total{"):
			m.applies += v
			m.byOutcome[scaleLabel(series, "result")] += v
		case strings.HasPrefix(series, "flotilla_agent_work_status_writes_total{"):
			m.statusWrites += v
		case strings.HasPrefix(series, "rest_client_requests_total{"):
			get := scaleLabel(series, "method") == "GET"
			switch scaleLabel(series, "host") {
			case hubHost:
				if get {
					m.hubGets += v
				} else {
					m.hubWrites += v
				}
			case memberHost:
				if get {
					m.memberGets += v
				} else {
					m.memberWrites += v
				}
			}
		}
	}
	return m, sc.Err()
}

func scaleLabel(series, name string) string {
	_, rest, ok := strings.Cut(series, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func scaleHost(t *testing.T, host string) string {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// scaleListed: the agent's Work informer has synced (client-go logs it).
func scaleListed(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Caches are synced") && strings.Contains(line, "work") {
			return true
		}
	}
	return false
}

// procMemory returns VmRSS and VmHWM of a process in MiB.
func procMemory(pid int) (rss, hwm float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// scaleCreateWorks creates n Works as the hub does (with the execution
// finalizer), each with one ConfigMap or one Deployment (kind "deployment")
// in namespace "scale", on 32 parallel clients.
func scaleCreateWorks(t *testing.T, fc flotillaclient.Interface, namespace string, n int, kind string) {
	t.Helper()
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				w := scaleWork(t, namespace, fmt.Sprintf("w-%05d", i), kind)
				if _, err := fc.WorkV1alpha1().Works(namespace).Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func scaleWork(t *testing.T, namespace, name, kind string) *workv1alpha1.Work {
	var obj map[string]any
	switch kind {
	default:
		obj = configMap("scale", name, map[string]any{"key": "value-" + name})
	case "deployment":
		labels := map[string]any{"app": name}
		obj = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": name, "namespace": "scale"},
			"spec": map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27",
						"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}}}}}}}
	}
	return &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Finalizers: []string{workv1alpha1.ExecutionFinalizer}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{manifest(t, obj)}}}}
}
