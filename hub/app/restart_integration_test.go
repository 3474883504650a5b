package app_test

// A hub that restarts over a settled fleet (issue 20 item 3). "Caught up"
// is observable on /metrics: flotilla_hub_leader is 1, and every workqueue
// of the hub is drained (workqueue_depth 0: no key waiting for a worker;
// workqueue_unfinished_work_seconds 0: none being processed) at every poll
// for a while. Keys may come and go meanwhile (each Lease renewal is one), a
// key waiting out a delay (a requeue at a Lease's expiry, a status hold) is
// not work to do now, and neither is counted.
//
// TestHubRestartWritesNothing (in `make test`) restarts a small settled
// fleet and asserts the new hub catches up without a single write.
// TestHubRestartReport measures it at fleet scale, a cluster failing during
// the catch-up:
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./hub/app/ -run 'TestHubRestartReport$' -v -timeout 60m \
//	  -hub-restart-report [-hub-restart-templates 10000] [-hub-restart-clusters 100]

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hub/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

var (
	hubRestartReport    = flag.Bool("hub-restart-report", false, "run the hub restart report (issue 20 item 3)")
	hubRestartTemplates = flag.Int("hub-restart-templates", 10000, "templates in the hub restart report (two Works each)")
	hubRestartClusters  = flag.Int("hub-restart-clusters", 100, "clusters in the hub restart report (a multiple of 5, at least 15: a failed cluster's bindings move within its region)")
	hubRestartSettle    = flag.Duration("hub-restart-settle", 2*time.Minute, "how long the first hub must go without a write before the restarts (held statuses come out late)")
	hubRestartLogs      = flag.String("hub-restart-logs", "", "directory for the hub processes' logs (a temporary one if empty)")
)

// queueSample is one workqueue's series.
type queueSample struct {
	Depth, Unfinished, Adds, Retries float64
}

// hubSample is what one scrape of a hub's /metrics says.
type hubSample struct {
	leader bool
	queues map[string]queueSample
	// writes: flotilla_api_requests_total without GETs, by `client method code`.
	writes map[string]float64
	rssMiB float64
}

// scrapeHub reads addr's /metrics.
func scrapeHub(addr string) (hubSample, error) {
	s := hubSample{queues: map[string]queueSample{}, writes: map[string]float64{}}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		family, labelText, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(labelText, ",") {
			if k, lv, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(lv, `"`)
			}
		}
		q := s.queues[labels["name"]]
		switch family {
		case "flotilla_hub_leader":
			s.leader = v == 1
		case "process_resident_memory_bytes":
			s.rssMiB = v / (1 << 20)
		case "flotilla_api_requests_total":
			if labels["method"] != "GET" {
				s.writes[labels["client"]+" "+labels["method"]+" "+labels["code"]] += v
			}
		case "workqueue_depth":
			q.Depth = v
		case "workqueue_unfinished_work_seconds":
			q.Unfinished = v
		case "workqueue_adds_total":
			q.Adds = v
		case "workqueue_retries_total":
			q.Retries = v
		default:
			continue
		}
		if strings.HasPrefix(family, "workqueue_") {
			s.queues[labels["name"]] = q
		}
	}
	return s, sc.Err()
}

// drained reports whether every queue is empty with nothing in flight, and
// each queue of minAdds has had at least that many adds since base (its
// informers' initial objects: the queue has been fed, not just created).
func (s hubSample) drained(base map[string]queueSample, minAdds map[string]float64) bool {
	for name, want := range minAdds {
		if s.queues[name].Adds-base[name].Adds < want {
			return false
		}
	}
	// Relative to base: a queue of an earlier hub of this process, stopped
	// with a key in it, leaves its depth on the shared series for good.
	for name, q := range s.queues {
		if q.Depth-base[name].Depth > 0 || q.Unfinished-base[name].Unfinished > 0 {
			return false
		}
	}
	return true
}

// writesBy sums a sample's writes per client, leader election left out
// (its renewals are the one write a caught-up hub makes, every
// --leader-elect-retry-period).
func (s hubSample) writesBy() (map[string]float64, float64) {
	out := map[string]float64{}
	var total float64
	for k, v := range s.writes {
		client, _, _ := strings.Cut(k, " ")
		if client == "leader-election" {
			continue
		}
		out[k] += v
		total += v
	}
	return out, total
}

// waitCaughtUp polls the hub's metrics at addr (queues at queueAddr, which
// may be another server exporting the same process's queues) until it leads
// and its queues have been drained at every poll for quiet. It returns the
// first drained sample of that stretch.
func waitCaughtUp(ctx context.Context, addr, queueAddr string, base map[string]queueSample, minAdds map[string]float64, quiet time.Duration) (hubSample, time.Time, error) {
	var first hubSample
	var firstAt time.Time
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
		s, err := scrapeHub(addr)
		if err != nil {
			return false, nil
		}
		if queueAddr != addr {
			q, err := scrapeHub(queueAddr)
			if err != nil {
				return false, nil
			}
			s.queues = q.queues
		}
		if !s.leader || !s.drained(base, minAdds) {
			firstAt = time.Time{}
			return false, nil
		}
		// Keys may still come and go (every Lease renewal is a
		// cluster-health key): what must hold is that none waits or is
		// in flight at any sample of the stretch.
		if firstAt.IsZero() {
			first, firstAt = s, time.Now()
		}
		return time.Since(firstAt) >= quiet, nil
	})
	return first, firstAt, err
}

// serveQueueMetrics serves the process's workqueue series on a registry of
// their own, for a test that needs them while no hub is running.
func serveQueueMetrics(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics.RegisterWorkqueueMetrics(reg)
	addr := testenv.FreeAddr(t)
	srv := &http.Server{Addr: addr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ListenAndServe() }()
	t.Cleanup(func() { _ = srv.Close() })
	waitUntil(t, "the queue metrics server", func() (bool, error) {
		_, err := scrapeHub(addr)
		return err == nil, nil
	})
	return addr
}

// runHub runs the whole hub in process against env until stop is called.
func runHub(t *testing.T, env *testenv.Env, tune func(*app.Options)) (metricsAddr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := app.NewOptions()
	opts.Kubeconfig = env.KubeconfigFor(t, env.Config)
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = testenv.FreeAddr(t), "0"
	if tune != nil {
		tune(opts)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("hub: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return opts.MetricsBindAddress, stop
}

// A hub restarted over a settled fleet catches up without writing anything:
// every binding Scheduled and FullyApplied, every template's status
// written, every Work applied, then a new hub starts (leader election on,
// as deployed) and, until its queues are drained, makes no write but its
// leader Lease's. A count, not a timing.
//
// Not parallel: the workqueue series are the process's (client-go's
// provider is global), so another test's hub must not run meanwhile.
func TestHubRestartWritesNothing(t *testing.T) {
	const clusters, templates = 4, 30
	env := testenv.Start(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	fc := flotillaclient.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tune := func(o *app.Options) {
		o.LeaderElection.LeaderElect = true
		// The test writes Ready as an agent would; no Lease renewals.
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app.NewOptions().LeaderElection.ResourceNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	queues := serveQueueMetrics(t)
	// What hubs of earlier tests left on the process's queue series.
	before, err := scrapeHub(queues)
	if err != nil {
		t.Fatal(err)
	}
	for name, q := range before.queues {
		if q.Depth != 0 || q.Unfinished != 0 {
			t.Logf("queue %s before the first hub: depth %.0f, unfinished %.3fs (left by an earlier hub)", name, q.Depth, q.Unfinished)
		}
	}

	first, stopFirst := runHub(t, env, tune)
	names := make([]string, clusters)
	for i := range names {
		names[i] = fmt.Sprintf("member%02d", i)
	}
	createReadyClusters(t, ctx, fc, names...)
	go framework.SimulateWorkAgents(ctx, fc, framework.WorkAgentOptions{})
	createWritesTemplates(t, ctx, fc, "default", templates)
	waitTemplatesFullyApplied(t, ctx, fc, "default", templates, 5*time.Minute)
	// The fleet guard publishes its verdict once its watch of that one
	// ConfigMap has synced; a first hub stopped before then would leave the
	// create to the restarted one (seen on a loaded machine).
	waitFor(t, "the fleet guard's ConfigMap", func() (bool, error) {
		_, err := env.Kube.CoreV1().ConfigMaps(app.NewOptions().LeaderElection.ResourceNamespace).Get(ctx, clustertaint.GuardConfigMapName, metav1.GetOptions{})
		return err == nil, nil
	})
	// Settled: the first hub has gone quiet (nothing queued, no write for
	// a few seconds).
	// Generous: on CI's two cores, with three other packages' control
	// planes beside it, conflicts back off and the first hub has once
	// needed more than 3 minutes to be quiet for 3 seconds.
	settleCtx, settleCancel := context.WithTimeout(ctx, 6*time.Minute)
	defer settleCancel()
	settled, _, err := waitCaughtUp(settleCtx, first, queues, before.queues, nil, 3*time.Second)
	if err != nil {
		last, _ := scrapeHub(queues)
		t.Fatalf("the first hub did not settle: %v; queues %+v", err, last.queues)
	}
	_, firstWrites := settled.writesBy()
	t.Logf("first hub: %.0f writes to settle %d templates", firstWrites, templates)
	stopFirst()

	base, err := scrapeHub(queues)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := runHub(t, env, tune)
	// Every binding and template passes through the main queues once.
	minAdds := map[string]float64{"detector": templates, "scheduler": templates, "binding": templates,
		"cluster-health": clusters, "cluster-taint": clusters, "cluster-lifecycle": clusters}
	waitCtx, waitCancel := context.WithTimeout(ctx, 3*time.Minute)
	defer waitCancel()
	caughtUp, _, err := waitCaughtUp(waitCtx, second, queues, base.queues, minAdds, 3*time.Second)
	if err != nil {
		last, _ := scrapeHub(queues)
		t.Fatalf("the restarted hub did not catch up: %v; queues %+v", err, last.queues)
	}
	added := map[string]float64{}
	for name, q := range caughtUp.queues {
		if d := q.Adds - base.queues[name].Adds; d > 0 {
			added[name] = d
		}
	}
	t.Logf("restarted hub caught up; keys added per queue: %v", added)
	writes, total := caughtUp.writesBy()
	if total != 0 {
		t.Errorf("the restarted hub wrote %.0f times before catching up, want 0 (leader election aside): %v", total, writes)
	}
	// And nothing more once caught up (a write just after the drain is a
	// write too).
	time.Sleep(2 * time.Second)
	later, err := scrapeHub(second)
	if err != nil {
		t.Fatal(err)
	}
	if writes, total := later.writesBy(); total != 0 {
		t.Errorf("the restarted hub wrote %.0f times by 2 s after catching up, want 0: %v", total, writes)
	}
}

// createWritesTemplates makes the writes harness's policy (Divided over 2
// clusters) and n of its Deployment templates in ns.
func createWritesTemplates(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns string, n int) {
	t.Helper()
	createWritesPolicy(t, ctx, fc, ns)
	for i := range n {
		name := fmt.Sprintf("app-%05d", i)
		raw, _ := json.Marshal(writesDeployment(name))
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
		if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitTemplatesFullyApplied waits until n templates of ns show FullyApplied
// on two clusters.
func waitTemplatesFullyApplied(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns string, n int, timeout time.Duration) {
	t.Helper()
	var applied int
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := fc.WorkV1alpha1().ResourceTemplates(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		applied = 0
		for _, rt := range list.Items {
			if meta.IsStatusConditionTrue(rt.Status.Conditions, workv1alpha1.BindingConditionFullyApplied) && len(rt.Status.Clusters) == 2 {
				applied++
			}
		}
		return applied == n, nil
	})
	if err != nil {
		t.Fatalf("%d of %d templates FullyApplied: %v", applied, n, err)
	}
}

// Set by the report for the hub process it starts.
const (
	envHubRestartKubeconfig = "FLOTILLA_HUBRESTART_KUBECONFIG"
	envHubRestartMetrics    = "FLOTILLA_HUBRESTART_METRICS"
)

// The report's failure timings: detection after the default grace, then
// short enough that the whole sequence fits in a few minutes (the defaults
// are 5 min before the taint and 600 s of toleration).
const (
	restartFailoverEvictionTimeout = 20 * time.Second
	restartTolerationSeconds       = 10
)

// TestHubRestartChild is the hub process of TestHubRestartReport: the whole
// hub (app.Run, leader election on) until SIGTERM.
func TestHubRestartChild(t *testing.T) {
	kubeconfig := os.Getenv(envHubRestartKubeconfig)
	if kubeconfig == "" {
		t.Skip("the hub process of TestHubRestartReport")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	opts := app.NewOptions()
	opts.Kubeconfig = kubeconfig
	opts.LeaderElection.LeaderElect = true
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = os.Getenv(envHubRestartMetrics), "0"
	opts.FailoverEvictionTimeout = restartFailoverEvictionTimeout
	opts.DefaultNotReadyTolerationSeconds, opts.DefaultUnreachableTolerationSeconds = restartTolerationSeconds, restartTolerationSeconds
	if err := app.Run(ctx, opts); err != nil {
		t.Fatal(err)
	}
}

// hubProcess is a hub started by the report.
type hubProcess struct {
	cmd     *exec.Cmd
	started time.Time
	metrics string
	done    chan error

	mu     sync.Mutex
	synced map[string]time.Duration // controller → when its caches synced
	leader time.Duration            // when it acquired the hub Lease
}

// startHubProcess runs TestHubRestartChild in a fresh process of this test
// binary, its log scanned for the controllers' "Caches are synced".
func startHubProcess(t *testing.T, kubeconfig, logPath string) *hubProcess {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	p := &hubProcess{metrics: testenv.FreeAddr(t), done: make(chan error, 1), synced: map[string]time.Duration{}}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHubRestartChild$", "-test.count=1", "-test.timeout=60m")
	p.cmd.Env = append(os.Environ(), envHubRestartKubeconfig+"="+kubeconfig, envHubRestartMetrics+"="+p.metrics)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(logFile, line)
			if strings.Contains(line, "Successfully acquired lease") {
				p.mu.Lock()
				p.leader = time.Since(p.started)
				p.mu.Unlock()
			}
			if !strings.Contains(line, "Caches are synced") {
				continue
			}
			_, rest, _ := strings.Cut(line, `controller="`)
			name, _, _ := strings.Cut(rest, `"`)
			p.mu.Lock()
			p.synced[name] = time.Since(p.started)
			p.mu.Unlock()
		}
	}()
	go func() { <-scanned; p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

// stop ends the hub as Kubernetes would (SIGTERM: it releases its Lease).
func (p *hubProcess) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Logf("hub process: %v", err)
		}
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatal("the hub process did not stop within a minute of SIGTERM")
	}
}

// lastSynced is when the last controller's caches synced, and how many had.
func (p *hubProcess) lastSynced() (time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Duration
	for _, d := range p.synced {
		last = max(last, d)
	}
	return last, len(p.synced)
}

// vmHWM is the process's peak RSS (VmHWM) in MiB.
func (p *hubProcess) vmHWM() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// restartRun is one hub process's catch-up, as the report prints it.
type restartRun struct {
	name                 string
	leader, synced, done time.Duration
	controllers          int
	rssMiB, peakMiB      float64
	writes               map[string]float64
	totalWrites          float64
}

// measureCatchUp waits until p leads and has caught up and says when.
func measureCatchUp(t *testing.T, ctx context.Context, name string, p *hubProcess, templates, clusters int) restartRun {
	t.Helper()
	r := restartRun{name: name}
	minAdds := map[string]float64{"detector": float64(templates), "scheduler": float64(templates), "binding": float64(templates),
		"cluster-health": float64(clusters)}
	waitCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	s, at, err := waitCaughtUp(waitCtx, p.metrics, p.metrics, nil, minAdds, 5*time.Second)
	if err != nil {
		last, _ := scrapeHub(p.metrics)
		t.Fatalf("%s: the hub did not catch up: %v; last queues %+v", name, err, last.queues)
	}
	r.done = at.Sub(p.started)
	p.mu.Lock()
	// From its log, as it happened: a scrape of a hub busy listing
	// 40,000 objects can take seconds.
	r.leader = p.leader
	p.mu.Unlock()
	r.synced, r.controllers = p.lastSynced()
	r.rssMiB, r.peakMiB = s.rssMiB, p.vmHWM()
	r.writes, r.totalWrites = s.writesBy()
	return r
}

// TestHubRestartReport fills envtest with a propagated fleet (the hub memory
// report's: 10,000 Deployment templates over 100 Ready clusters, each
// binding Scheduled and FullyApplied on two clusters, template statuses
// written, 20,000 Works reported applied), keeps every cluster's Lease
// renewed and every Work reported as agents would, then runs the hub three
// times, each in a fresh process: the first until caught up (what it writes
// is where the filled objects differ from what the hub itself would leave),
// the second a plain restart, the third a restart during which one
// cluster's Lease stops being renewed. For each it prints when the hub led,
// had every controller's caches synced, and had caught up; what it wrote
// until then, by client; its RSS. For the failure, when the hub saw Ready
// Unknown, tainted the cluster NoExecute, and evicted and rescheduled its
// bindings.
func TestHubRestartReport(t *testing.T) {
	if !*hubRestartReport {
		t.Skip("run with -hub-restart-report")
	}
	templates, clusters := *hubRestartTemplates, *hubRestartClusters
	env := testenv.Start(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	fc := flotillaclient.NewForConfigOrDie(cfg)
	kc := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app.NewOptions().LeaderElection.ResourceNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	start := time.Now()
	fillWrites, err := app.FillFleet(ctx, env, fc, clusters, templates, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("filled: %d clusters, %d templates and bindings, %d Works (%d writes) in %s", clusters, templates, 2*templates, fillWrites,
		time.Since(start).Round(time.Second))

	// The agents: every cluster's Lease renewed every 10 s (the agent's
	// default), each cluster's renewals stoppable on their own; every Work
	// generation reported applied.
	renewals := map[string]context.CancelFunc{}
	for i := range clusters {
		name := app.HubMemoryCluster(i)
		agentCtx, stopAgent := context.WithCancel(ctx)
		renewals[name] = stopAgent
		go framework.SimulateAgent(agentCtx, kc, fc, name, 10*time.Second, nil)
	}
	go framework.SimulateWorkAgents(ctx, fc, framework.WorkAgentOptions{})

	kubeconfig := env.KubeconfigFor(t, env.Config)
	logs := *hubRestartLogs
	if logs == "" {
		if logs, err = os.MkdirTemp("", "hub-restart-"); err != nil {
			t.Fatal(err)
		}
	}
	var runs []restartRun
	for i, name := range []string{"first start (settles the filled fleet)", "restart", "restart, a cluster failing"} {
		logPath := filepath.Join(logs, fmt.Sprintf("hub-%d.log", i))
		t.Logf("%s: hub log in %s", name, logPath)
		var failure *failureTimeline
		if strings.Contains(name, "failing") {
			// Its informers are synced before the hub starts, so its
			// timestamps are the events' and not the watch's start.
			failure = watchFailure(t, ctx, fc, app.HubMemoryCluster(0))
		}
		p := startHubProcess(t, kubeconfig, logPath)
		if failure != nil {
			failure.start(p.started)
			renewals[app.HubMemoryCluster(0)]()
			failure.mu.Lock()
			failure.stopped = time.Since(p.started)
			failure.mu.Unlock()
		}
		var before map[string]statusSnapshot
		if i > 0 {
			before = snapshotStatuses(t, ctx, fc)
		}
		r := measureCatchUp(t, ctx, name, p, templates, clusters)
		t.Logf("%s: %+v", name, r)
		if before != nil {
			t.Logf("%s: what it rewrote by the time it caught up:\n%s", name, diffStatuses(before, snapshotStatuses(t, ctx, fc), 4))
		}
		runs = append(runs, r)
		if i == 0 {
			// Statuses held back (an in-flight status waits out a hold)
			// come out after the queues drain: the fleet is settled once
			// the hub has gone without a write for a while.
			last, lastChange := r.totalWrites, time.Now()
			for time.Since(lastChange) < *hubRestartSettle {
				time.Sleep(5 * time.Second)
				s, err := scrapeHub(p.metrics)
				if err != nil {
					t.Fatal(err)
				}
				if _, total := s.writesBy(); total != last {
					last, lastChange = total, time.Now()
				}
			}
			t.Logf("%s: %.0f writes in all, the last %.0f s after the start", name, last, lastChange.Sub(p.started).Seconds())
		}
		if failure != nil {
			failure.wait(t, ctx, 5*time.Minute)
			after, _ := scrapeHub(p.metrics)
			writes, _ := after.writesBy()
			t.Logf("failure handled:\n%s\nhub writes from start to the last binding rescheduled: %v", failure.table(), writes)
		}
		p.stop(t)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n%d templates (%d bindings, %d Works) over %d clusters\n\n", templates, templates, 2*templates, clusters)
	fmt.Fprintf(&b, "| run | leading | caches synced (controllers) | caught up | writes to caught up (leader election aside) | RSS at caught up | RSS peak |\n|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %.1f s | %.1f s (%d) | %.1f s | %.0f %s | %.0f MiB | %.0f MiB |\n", r.name, r.leader.Seconds(), r.synced.Seconds(),
			r.controllers, r.done.Seconds(), r.totalWrites, formatWrites(r.writes), r.rssMiB, r.peakMiB)
	}
	t.Log(b.String())
}

func formatWrites(w map[string]float64) string {
	if len(w) == 0 {
		return ""
	}
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %.0f", k, w[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// failureTimeline is what the report saw of one cluster failing, as
// durations since the hub process started.
type failureTimeline struct {
	cluster string
	started time.Time
	stopped time.Duration // its Lease renewals stopped

	mu               sync.Mutex
	ready            bool          // the bindings on the cluster are known
	unknown, noSched time.Duration // Ready=Unknown; a NoSchedule taint
	noExecute        time.Duration // the NoExecute taint
	onCluster        map[string]bool
	evicted          map[string]time.Duration // binding → the cluster left its spec.clusters
	rescheduled      map[string]time.Duration // binding → two clusters again, not that one
	order            []string
	done             chan struct{}
	closeOnce        sync.Once
}

// watchFailure records, from informers of its own, what happens to cluster
// and the bindings placed on it.
func watchFailure(t *testing.T, ctx context.Context, fc flotillaclient.Interface, cluster string) *failureTimeline {
	t.Helper()
	f := &failureTimeline{cluster: cluster, onCluster: map[string]bool{}, evicted: map[string]time.Duration{},
		rescheduled: map[string]time.Duration{}, done: make(chan struct{})}
	factory := flotillainformers.NewSharedInformerFactory(fc, 0)
	clusters := factory.Cluster().V1alpha1().Clusters().Informer()
	bindings := factory.Work().V1alpha1().ResourceBindings().Informer()
	_, _ = clusters.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: f.observeCluster, UpdateFunc: func(_, n any) { f.observeCluster(n) }})
	_, _ = bindings.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: f.observeBinding, UpdateFunc: func(_, n any) { f.observeBinding(n) }})
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), clusters.HasSynced, bindings.HasSynced) {
		t.Fatal("failure watch: caches not synced")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, obj := range bindings.GetStore().List() {
		rb := obj.(*workv1alpha1.ResourceBinding)
		for _, tc := range rb.Spec.Clusters {
			if tc.Name == cluster {
				f.onCluster[rb.Namespace+"/"+rb.Name] = true
			}
		}
	}
	if len(f.onCluster) == 0 {
		t.Fatalf("no binding is placed on %s", cluster)
	}
	return f
}

// start starts the clock and the recording.
func (f *failureTimeline) start(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started, f.ready = at, true
}

func (f *failureTimeline) since() time.Duration { return time.Since(f.started) }

func (f *failureTimeline) observeCluster(obj any) {
	c := obj.(*clusterv1alpha1.Cluster)
	if c.Name != f.cluster {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready {
		return
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); cond != nil &&
		cond.Status == metav1.ConditionUnknown && f.unknown == 0 {
		f.unknown = f.since()
		f.order = append(f.order, "Ready=Unknown")
	}
	for _, taint := range c.Spec.Taints {
		switch {
		case taint.Effect == corev1.TaintEffectNoSchedule && f.noSched == 0:
			f.noSched = f.since()
			f.order = append(f.order, "NoSchedule "+taint.Key)
		case taint.Effect == corev1.TaintEffectNoExecute && f.noExecute == 0:
			f.noExecute = f.since()
			f.order = append(f.order, "NoExecute "+taint.Key)
		}
	}
}

func (f *failureTimeline) observeBinding(obj any) {
	rb := obj.(*workv1alpha1.ResourceBinding)
	key := rb.Namespace + "/" + rb.Name
	on := false
	for _, tc := range rb.Spec.Clusters {
		on = on || tc.Name == f.cluster
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready || !f.onCluster[key] {
		return
	}
	if _, ok := f.evicted[key]; !ok && !on {
		f.evicted[key] = f.since()
		if len(f.evicted) == 1 {
			f.order = append(f.order, "first binding evicted")
		}
		if len(f.evicted) == len(f.onCluster) {
			f.order = append(f.order, "last binding evicted")
		}
	}
	if _, ok := f.rescheduled[key]; !ok && !on && len(rb.Spec.Clusters) == 2 {
		f.rescheduled[key] = f.since()
		if len(f.rescheduled) == len(f.onCluster) {
			f.order = append(f.order, "last binding rescheduled")
			f.closeOnce.Do(func() { close(f.done) })
		}
	}
}

// wait waits until every binding of the cluster is rescheduled.
func (f *failureTimeline) wait(t *testing.T, ctx context.Context, timeout time.Duration) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(timeout):
		f.mu.Lock()
		defer f.mu.Unlock()
		var stuck []string
		for key := range f.onCluster {
			if _, ok := f.rescheduled[key]; !ok {
				stuck = append(stuck, key)
			}
		}
		sort.Strings(stuck)
		t.Errorf("%d of %d bindings of %s rescheduled after %s; not: %v\n%s", len(f.rescheduled), len(f.onCluster), f.cluster, timeout, stuck, f.tableLocked())
	case <-ctx.Done():
		t.Error(ctx.Err())
	}
}

func (f *failureTimeline) table() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tableLocked()
}

func (f *failureTimeline) tableLocked() string {
	span := func(m map[string]time.Duration) (time.Duration, time.Duration) {
		var lo, hi time.Duration
		for _, d := range m {
			if lo == 0 || d < lo {
				lo = d
			}
			hi = max(hi, d)
		}
		return lo, hi
	}
	ev0, ev1 := span(f.evicted)
	rs0, rs1 := span(f.rescheduled)
	var b strings.Builder
	fmt.Fprintf(&b, "| %s (%d bindings on it) | since the hub process started |\n|---|---|\n", f.cluster, len(f.onCluster))
	fmt.Fprintf(&b, "| Lease renewals stopped | %.1f s |\n", f.stopped.Seconds())
	fmt.Fprintf(&b, "| Ready=Unknown | %.1f s |\n", f.unknown.Seconds())
	fmt.Fprintf(&b, "| NoSchedule taint | %.1f s |\n", f.noSched.Seconds())
	fmt.Fprintf(&b, "| NoExecute taint | %.1f s |\n", f.noExecute.Seconds())
	fmt.Fprintf(&b, "| bindings evicted (first – last, %d) | %.1f – %.1f s |\n", len(f.evicted), ev0.Seconds(), ev1.Seconds())
	fmt.Fprintf(&b, "| bindings rescheduled to 2 other clusters (first – last, %d) | %.1f – %.1f s |\n", len(f.rescheduled), rs0.Seconds(), rs1.Seconds())
	fmt.Fprintf(&b, "order seen: %s\n", strings.Join(f.order, " → "))
	return b.String()
}

// statusSnapshot is an object's resourceVersion and status.
type statusSnapshot struct {
	rv     string
	status map[string]any
}

// snapshotStatuses lists every template and binding, keyed kind/ns/name.
func snapshotStatuses(t *testing.T, ctx context.Context, fc flotillaclient.Interface) map[string]statusSnapshot {
	t.Helper()
	out := map[string]statusSnapshot{}
	add := func(kind, ns, name, rv string, status any) {
		raw, _ := json.Marshal(status)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		out[kind+"/"+ns+"/"+name] = statusSnapshot{rv: rv, status: m}
	}
	templates, err := fc.WorkV1alpha1().ResourceTemplates("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range templates.Items {
		add("ResourceTemplate", o.Namespace, o.Name, o.ResourceVersion, o.Status)
	}
	bindings, err := fc.WorkV1alpha1().ResourceBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range bindings.Items {
		add("ResourceBinding", o.Namespace, o.Name, o.ResourceVersion, o.Status)
	}
	return out
}

// diffStatuses counts the objects whose resourceVersion changed, by kind,
// and shows the status fields that changed for the first few of each.
func diffStatuses(before, after map[string]statusSnapshot, show int) string {
	var b strings.Builder
	changed := map[string]int{}
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, old := after[k], before[k]
		if a.rv == old.rv {
			continue
		}
		kind, _, _ := strings.Cut(k, "/")
		changed[kind]++
		if changed[kind] > show {
			continue
		}
		fmt.Fprintf(&b, "  %s:\n", k)
		fields := map[string]bool{}
		for f := range a.status {
			fields[f] = true
		}
		for f := range old.status {
			fields[f] = true
		}
		names := make([]string, 0, len(fields))
		for f := range fields {
			names = append(names, f)
		}
		sort.Strings(names)
		for _, f := range names {
			o, n := old.status[f], a.status[f]
			if reflect.DeepEqual(o, n) {
				continue
			}
			oj, _ := json.Marshal(o)
			nj, _ := json.Marshal(n)
			fmt.Fprintf(&b, "    status.%s: %s\n      → %s\n", f, truncate(string(oj), 600), truncate(string(nj), 600))
		}
	}
	fmt.Fprintf(&b, "  changed: %v", changed)
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
