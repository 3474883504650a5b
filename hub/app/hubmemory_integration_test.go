package app

// The hub's memory at fleet scale (issue 20): a real apiserver holds what
// 10,000 templates over 100 clusters leave behind (templates, bindings,
// two Works each, with the statuses the hub and the agents write), then a
// fresh process starts the hub's informers and controllers as Run does,
// without running a worker, and reports its heap and resident memory once
// the caches are synced. One process per measurement, so what the filling
// allocated never counts; each variant of the cache transform is measured
// against the same objects.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./hub/app/ -run 'TestHubMemoryReport$' -v -timeout 30m \
//	  -hub-memory-report [-hub-memory-templates 10000] [-hub-memory-profiles DIR]

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/applicationfailover"
	"github.com/flotilla-io/flotilla/pkg/hub/binding"
	"github.com/flotilla-io/flotilla/pkg/hub/cachetransform"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterhealth"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/hub/dependencies"
	"github.com/flotilla-io/flotilla/pkg/hub/detector"
	"github.com/flotilla-io/flotilla/pkg/hub/failback"
	"github.com/flotilla-io/flotilla/pkg/hub/failoverhistory"
	"github.com/flotilla-io/flotilla/pkg/hub/gracefuleviction"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/hub/ingress"
	"github.com/flotilla-io/flotilla/pkg/hub/remedy"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler"
	"github.com/flotilla-io/flotilla/pkg/hub/taintmanager"
	"github.com/flotilla-io/flotilla/pkg/hub/workloadrebalancer"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

var (
	hubMemoryReport      = flag.Bool("hub-memory-report", false, "run the hub memory report (issue 20)")
	hubMemoryTemplates   = flag.Int("hub-memory-templates", 10000, "templates in the hub memory report (two Works each)")
	hubMemoryClusters    = flag.Int("hub-memory-clusters", 100, "clusters in the hub memory report (a multiple of 5)")
	hubMemoryRuns        = flag.Int("hub-memory-runs", 1, "measurements of each variant in the hub memory report")
	hubMemoryProfiles    = flag.String("hub-memory-profiles", "", "directory for the report's heap profiles (heap-<variant>-<run>.pprof)")
	hubMemoryVariantList = flag.String("hub-memory-variants", "none,strip,compact", "cache transforms measured, in order; <transform>@NAME=VALUE adds an environment variable to the measuring process")
	hubMemoryKubectl     = flag.Bool("hub-memory-kubectl-apply", true, "templates carry kubectl's last-applied annotation, as `kubectl apply` leaves it")
)

// Set by the report for the measuring child process.
const (
	envHubMemoryKubeconfig = "FLOTILLA_HUBMEM_KUBECONFIG"
	envHubMemoryVariant    = "FLOTILLA_HUBMEM_VARIANT"
	envHubMemoryProfile    = "FLOTILLA_HUBMEM_PROFILE"
)

// hubMemoryVariants are the cache transforms measured.
var hubMemoryVariants = map[string]cache.TransformFunc{
	"none":    nil,
	"strip":   cachetransform.Strip,
	"compact": cachetransform.Compact,
}

// hubMemoryResult is what the child reports.
type hubMemoryResult struct {
	Variant        string  `json:"variant"`
	Objects        int     `json:"objects"`
	SyncSeconds    float64 `json:"syncSeconds"`
	HeapInuseMiB   float64 `json:"heapInuseMiB"`
	HeapAllocMiB   float64 `json:"heapAllocMiB"`
	BaselineMiB    float64 `json:"baselineHeapInuseMiB"`
	RSSAtSyncMiB   float64 `json:"rssAtSyncMiB"`
	RSSPeakMiB     float64 `json:"rssPeakMiB"`
	RSSAfterGCMiB  float64 `json:"rssAfterGCMiB"`
	TotalAllocMiB  float64 `json:"totalAllocMiB"`
	NumGC          uint32  `json:"numGC"`
	HeapProfile    string  `json:"heapProfile,omitempty"`
	BaselineRSSMiB float64 `json:"baselineRSSMiB"`
}

func TestHubMemoryReport(t *testing.T) {
	if !*hubMemoryReport {
		t.Skip("run with -hub-memory-report")
	}
	for _, v := range strings.Split(*hubMemoryVariantList, ",") {
		v, _, _ = strings.Cut(v, "@")
		if _, ok := hubMemoryVariants[v]; !ok {
			t.Fatalf("-hub-memory-variants: unknown %q", v)
		}
	}
	env := testenv.Start(t)
	cfg := *env.Config
	cfg.QPS, cfg.Burst = 5000, 10000
	fc := flotillaclient.NewForConfigOrDie(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	start := time.Now()
	writes, err := fillFleet(ctx, env, fc, *hubMemoryClusters, *hubMemoryTemplates, *hubMemoryKubectl)
	if err != nil {
		t.Fatal(err)
	}
	filled := time.Since(start)
	t.Logf("filled: %d clusters, %d templates, %d bindings, %d Works (%d writes, 32 workers) in %s",
		*hubMemoryClusters, *hubMemoryTemplates, *hubMemoryTemplates, 2**hubMemoryTemplates, writes, filled.Round(time.Second))

	kubeconfig := env.KubeconfigFor(t, env.Config)
	profiles := *hubMemoryProfiles
	if profiles != "" {
		if err := os.MkdirAll(profiles, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var results []hubMemoryResult
	for run := range *hubMemoryRuns {
		for _, variant := range strings.Split(*hubMemoryVariantList, ",") {
			profile := ""
			if profiles != "" {
				profile = filepath.Join(profiles, fmt.Sprintf("heap-%s-%d.pprof", strings.NewReplacer("@", "-", "=", "-").Replace(variant), run))
			}
			r, err := measureHubMemory(ctx, kubeconfig, variant, profile)
			if err != nil {
				t.Fatal(err)
			}
			r.Variant = variant
			t.Logf("%s run %d: %+v", variant, run, r)
			results = append(results, r)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| transform | objects cached | synced in | heap in use after GC | RSS at sync | RSS peak | RSS after GC+FreeOSMemory |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %.1f s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |\n",
			r.Variant, r.Objects, r.SyncSeconds, r.HeapInuseMiB, r.RSSAtSyncMiB, r.RSSPeakMiB, r.RSSAfterGCMiB)
	}
	fmt.Fprintf(&b, "(process baseline before the informers: heap %.1f MiB, RSS %.1f MiB; fill took %s)\n",
		results[0].BaselineMiB, results[0].BaselineRSSMiB, filled.Round(time.Second))
	t.Log(b.String())
}

// measureHubMemory runs TestHubMemoryChild in a fresh process of this test
// binary and returns what it printed.
func measureHubMemory(ctx context.Context, kubeconfig, variant, profile string) (hubMemoryResult, error) {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHubMemoryChild$", "-test.count=1", "-test.timeout=20m")
	// "<transform>@NAME=VALUE" runs the child with that environment
	// variable too (e.g. compact@GOMEMLIMIT=200MiB).
	transform, childEnv, _ := strings.Cut(variant, "@")
	cmd.Env = append(os.Environ(), envHubMemoryKubeconfig+"="+kubeconfig, envHubMemoryVariant+"="+transform, envHubMemoryProfile+"="+profile)
	if childEnv != "" {
		cmd.Env = append(cmd.Env, childEnv)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return hubMemoryResult{}, fmt.Errorf("child (%s): %v\n%s\n%s", variant, err, out, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "HUBMEM "); ok {
			var r hubMemoryResult
			return r, json.Unmarshal([]byte(line), &r)
		}
	}
	return hubMemoryResult{}, fmt.Errorf("child (%s) printed no result:\n%s\n%s", variant, out, stderr.String())
}

// TestHubMemoryChild is the measuring process (run by TestHubMemoryReport).
func TestHubMemoryChild(t *testing.T) {
	kubeconfig := os.Getenv(envHubMemoryKubeconfig)
	if kubeconfig == "" {
		t.Skip("the measuring process of TestHubMemoryReport")
	}
	variant := os.Getenv(envHubMemoryVariant)
	transform, ok := hubMemoryVariants[variant]
	if !ok {
		t.Fatalf("unknown variant %q", variant)
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	baseRSS := procStatusMiB(t, "VmRSS")

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := NewOptions()
	registry := metrics.NewRegistry("hub")
	clients := &clientBuilder{cfg: cfg, requests: metrics.NewAPIRequestCounter(registry)}
	factory, kubeFactory := newInformerFactories(clients, transform)
	newHubControllersForMemory(clients, factory, kubeFactory, registry, opts)

	start := time.Now()
	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v not synced", typ)
		}
	}
	kubeFactory.WaitForCacheSync(ctx.Done())
	synced := time.Since(start)
	r := hubMemoryResult{Variant: variant, SyncSeconds: synced.Seconds(), RSSAtSyncMiB: procStatusMiB(t, "VmRSS"),
		BaselineMiB: mib(base.HeapInuse), BaselineRSSMiB: baseRSS}
	for _, inf := range []cache.SharedIndexInformer{factory.Work().V1alpha1().ResourceTemplates().Informer(),
		factory.Work().V1alpha1().ResourceBindings().Informer(), factory.Work().V1alpha1().Works().Informer(),
		factory.Cluster().V1alpha1().Clusters().Informer()} {
		r.Objects += len(inf.GetStore().ListKeys())
	}
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapInuseMiB, r.HeapAllocMiB, r.TotalAllocMiB, r.NumGC = mib(ms.HeapInuse), mib(ms.HeapAlloc), mib(ms.TotalAlloc), ms.NumGC
	if path := os.Getenv(envHubMemoryProfile); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		r.HeapProfile = path
	}
	debug.FreeOSMemory()
	r.RSSAfterGCMiB = procStatusMiB(t, "VmRSS")
	r.RSSPeakMiB = procStatusMiB(t, "VmHWM")
	out, _ := json.Marshal(r)
	fmt.Printf("HUBMEM %s\n", out)
	runtime.KeepAlive(factory)
	runtime.KeepAlive(kubeFactory)
}

// newHubControllersForMemory makes the controllers as Run does (keep it in
// step with hub.go), so the same informers, indexers and event handlers
// exist; no worker runs and nothing is written.
func newHubControllersForMemory(clients *clientBuilder, factory flotillainformers.SharedInformerFactory, kubeFactory informers.SharedInformerFactory, registry *prometheus.Registry, opts *Options) {
	recorder := record.EventRecorder(&record.FakeRecorder{})
	hubMetrics := hubmetrics.New(registry)
	clusters := factory.Cluster().V1alpha1().Clusters().Informer()
	clusterlifecycle.NewController(clients.kube("cluster-lifecycle"), clients.flotilla("cluster-lifecycle"), clusters, kubeFactory,
		clusterlifecycle.Options{Recorder: recorder, Metrics: hubMetrics})
	clusterhealth.NewController(clients.flotilla("cluster-health"), clusters, kubeFactory.Coordination().V1().Leases().Informer(), clusterhealth.Options{
		MonitorPeriod: opts.ClusterMonitorPeriod, GracePeriod: opts.ClusterMonitorGracePeriod,
		StartupGracePeriod: opts.ClusterStartupGracePeriod, Metrics: hubMetrics, Recorder: recorder,
	})
	guard := clustertaint.NewFleetGuard(opts.UnhealthyClusterThreshold, opts.ResourceEvictionRate, opts.SecondaryEvictionRate).
		WithLargeFleetSizeThreshold(opts.LargeFleetSizeThreshold)
	clustertaint.NewController(clients.flotilla("cluster-taint"), clusters, factory.Cluster().V1alpha1().ClusterTaintPolicies().Informer(), guard, clustertaint.Options{
		FailoverEvictionTimeout: opts.FailoverEvictionTimeout, GuardPeriod: opts.ClusterMonitorPeriod, Metrics: hubMetrics, Recorder: recorder,
		GuardPublisher: clustertaint.NewGuardPublisher(clients.kube("fleet-guard"), opts.LeaderElection.ResourceNamespace),
	})
	detector.NewController(clients.flotilla("detector"), factory, recorder,
		detector.HostScope(memory.NewMemCacheClient(clients.kube("detector").Discovery()), clock.RealClock{}, time.Minute))
	dependencies.NewController(clients.flotilla("dependencies"), factory, dependencies.Options{Recorder: recorder,
		Scope: dependencies.ScopeFunc(detector.HostScope(memory.NewMemCacheClient(clients.kube("dependencies").Discovery()), clock.RealClock{}, time.Minute))})
	scheduler.NewController(clients.flotilla("scheduler"), factory, scheduler.Options{
		EvictionHistoryTTL: opts.EvictionHistoryTTL, Metrics: hubMetrics, Recorder: recorder})
	binding.NewController(clients.flotilla("binding"), factory, binding.Options{Metrics: hubMetrics, Recorder: recorder})
	taintmanager.NewController(clients.flotilla("taint-manager"), factory, taintmanager.Options{
		Defaults: taintmanager.Defaults{NotReadyTolerationSeconds: opts.DefaultNotReadyTolerationSeconds,
			UnreachableTolerationSeconds: opts.DefaultUnreachableTolerationSeconds},
		Guard: guard, Metrics: hubMetrics, Recorder: recorder})
	applicationfailover.NewController(clients.flotilla("application-failover"), factory, applicationfailover.Options{
		Guard: guard, EvictionHistoryTTL: opts.EvictionHistoryTTL, Metrics: hubMetrics, Recorder: recorder})
	gracefuleviction.NewController(clients.flotilla("graceful-eviction"), factory, gracefuleviction.Options{
		GracefulEvictionTimeout: opts.GracefulEvictionTimeout, Metrics: hubMetrics, Recorder: recorder})
	failoverhistory.NewController(clients.flotilla("failover-history"), factory, failoverhistory.Options{
		Metrics: failoverhistory.NewMetrics(registry), Recorder: recorder})
	failback.NewController(clients.flotilla("failback"), factory, failback.Options{
		Guard: guard, Metrics: failback.NewMetrics(registry), Recorder: recorder})
	workloadrebalancer.NewController(clients.flotilla("workload-rebalancer"), factory, workloadrebalancer.Options{Recorder: recorder})
	remedy.NewController(clients.flotilla("remedy"), factory, remedy.Options{Metrics: hubMetrics, Recorder: recorder})
	ingress.NewController(clients.flotilla("multicluster-ingress"), factory, ingress.Options{Metrics: hubMetrics, Recorder: recorder})
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// procStatusMiB reads a "<field>: <n> kB" line of /proc/self/status.
func procStatusMiB(t *testing.T, field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				t.Fatalf("/proc/self/status %s: %v", field, err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("/proc/self/status has no %s", field)
	return 0
}

const (
	hubMemoryNamespace = "bench"
	hubMemoryRegions   = 5
	hubMemoryWorkers   = 32
)

func hubMemoryCluster(i int) string { return fmt.Sprintf("member-%03d", i) }

// fillFleet creates what the hub and the agents leave for a propagated
// fleet, with the writers' field managers (so managedFields are what a real
// hub caches): per template, the template (kubectl) and its status (hub),
// the binding with its schedule and its status (hub), and two Works (hub)
// with their status (agent). It returns the number of writes.
func fillFleet(ctx context.Context, env *testenv.Env, fc flotillaclient.Interface, clusters, templates int, kubectlApply bool) (int64, error) {
	var writes atomic.Int64
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubMemoryNamespace}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	clusterNames := make([]int, clusters)
	for i := range clusterNames {
		clusterNames[i] = i
	}
	if err := parallel(ctx, clusterNames, func(i int) error {
		name := hubMemoryCluster(i)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterlifecycle.Namespace(name), Labels: map[string]string{clusterlifecycle.LabelCluster: name}}}
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: "flotilla-hub"}); err != nil {
			return err
		}
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"flotilla.io/bench": "true"}},
			Spec: clusterv1alpha1.ClusterSpec{ID: string(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))), SyncMode: clusterv1alpha1.Pull,
				Provider: "kwok", Region: fmt.Sprintf("region-%d", i%hubMemoryRegions), Zones: []string{fmt.Sprintf("region-%d-a", i%hubMemoryRegions)}}}
		created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
		if err != nil {
			return err
		}
		created.Status = clusterv1alpha1.ClusterStatus{KubernetesVersion: "v1.36.3",
			APIEnablements: []clusterv1alpha1.APIEnablement{
				{GroupVersion: "v1", Resources: []clusterv1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}, {Name: "secrets", Kind: "Secret"},
					{Name: "services", Kind: "Service"}, {Name: "pods", Kind: "Pod"}, {Name: "persistentvolumeclaims", Kind: "PersistentVolumeClaim"}}},
				{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"},
					{Name: "statefulsets", Kind: "StatefulSet"}, {Name: "daemonsets", Kind: "DaemonSet"}}},
				{GroupVersion: "batch/v1", Resources: []clusterv1alpha1.APIResource{{Name: "jobs", Kind: "Job"}}},
				{GroupVersion: "networking.k8s.io/v1", Resources: []clusterv1alpha1.APIResource{{Name: "ingresses", Kind: "Ingress"}}},
			},
			Conditions: []metav1.Condition{
				{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady,
					Message: "cluster is healthy and ready to accept workloads", LastTransitionTime: metav1.Now()},
				{Type: clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady, Status: metav1.ConditionTrue, Reason: "ServiceDomainNameResolutionReady",
					Message: "the nodes resolve kubernetes.default", LastTransitionTime: metav1.Now()}},
			NodeSummary: &clusterv1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 3},
			ResourceSummary: &clusterv1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("330"), corev1.ResourceCPU: resource.MustParse("96"),
					corev1.ResourceMemory: resource.MustParse("384Gi")},
				Allocated: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("40"), corev1.ResourceCPU: resource.MustParse("20"),
					corev1.ResourceMemory: resource.MustParse("40Gi")}},
		}
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "flotilla-agent"})
		return err
	}); err != nil {
		return 0, fmt.Errorf("clusters: %w", err)
	}
	writes.Add(int64(3 * clusters))

	placements := make([]*policyv1alpha1.Placement, hubMemoryRegions)
	for r := range placements {
		placements[r] = &policyv1alpha1.Placement{
			ClusterAffinity: &policyv1alpha1.ClusterAffinity{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"flotilla.io/bench": "true"}},
				FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{
					{Key: policyv1alpha1.RegionField, Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprintf("region-%d", r)}}}}},
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted},
		}
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("region-%d", r), Namespace: hubMemoryNamespace},
			Spec: policyv1alpha1.PropagationSpec{
				ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": fmt.Sprintf("region-%d", r)}}}},
				Placement: *placements[r]}}
		if _, err := fc.PolicyV1alpha1().PropagationPolicies(hubMemoryNamespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			return 0, err
		}
		writes.Add(1)
	}

	perRegion := clusters / hubMemoryRegions
	indexes := make([]int, templates)
	for i := range indexes {
		indexes[i] = i
	}
	err := parallel(ctx, indexes, func(i int) error {
		n, err := fillTemplate(ctx, fc, i, perRegion, placements[i%hubMemoryRegions], kubectlApply)
		writes.Add(n)
		return err
	})
	return writes.Load(), err
}

func fillTemplate(ctx context.Context, fc flotillaclient.Interface, i, perRegion int, placement *policyv1alpha1.Placement, kubectlApply bool) (int64, error) {
	var writes int64
	now := metav1.Now()
	region := i % hubMemoryRegions
	name := fmt.Sprintf("app-%05d", i)
	// Two selected clusters of the template's region and one the spread
	// left out, as the scheduler would pick them.
	pick := func(k int) string { return hubMemoryCluster((k%perRegion)*hubMemoryRegions + region) }
	selected := []string{pick(i), pick(i + 7)}
	if selected[0] == selected[1] {
		selected[1] = pick(i + 1)
	}
	unselected := pick(i + 13)
	targets := []workv1alpha1.TargetCluster{{Name: selected[0], Replicas: 2}, {Name: selected[1], Replicas: 2}}

	manifest, _ := json.Marshal(hubMemoryDeployment(name, fmt.Sprintf("region-%d", region), 4))
	tmpl := &workv1alpha1.ResourceTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: workv1alpha1.SchemeGroupVersion.String(), Kind: "ResourceTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubMemoryNamespace},
		Spec:       workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: k8sruntime.RawExtension{Raw: manifest}}},
	}
	if kubectlApply {
		// kubectl apply records the object it applied, annotations map
		// included (empty), in the annotation itself.
		applied, _ := json.Marshal(tmpl)
		tmpl.Annotations = map[string]string{cachetransform.AnnotationLastApplied: string(applied) + "\n"}
	}
	tmpl, err := fc.WorkV1alpha1().ResourceTemplates(hubMemoryNamespace).Create(ctx, tmpl, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
	if err != nil {
		return writes, err
	}
	writes++

	replicaStatus := func(replicas int) *k8sruntime.RawExtension {
		return &k8sruntime.RawExtension{Raw: fmt.Appendf(nil,
			`{"availableReplicas":%d,"generation":1,"observedGeneration":1,"readyReplicas":%d,"replicas":%d,"updatedReplicas":%d}`, replicas, replicas, replicas, replicas)}
	}
	aggregated := func(generation int64) []workv1alpha1.AggregatedStatusItem {
		var items []workv1alpha1.AggregatedStatusItem
		for _, c := range selected {
			items = append(items, workv1alpha1.AggregatedStatusItem{ClusterName: c, Status: replicaStatus(2), Applied: true,
				Health: workv1alpha1.ResourceHealthy, ObservedGeneration: generation, FirstReportedTime: &now, EverHealthy: true})
		}
		return items
	}
	conditions := func(generation int64) []metav1.Condition {
		return []metav1.Condition{
			{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: "Success",
				Message: "Binding has been scheduled successfully.", ObservedGeneration: generation, LastTransitionTime: now},
			{Type: workv1alpha1.BindingConditionFullyApplied, Status: metav1.ConditionTrue, Reason: "FullyAppliedSuccess",
				Message: "All works have been successfully applied", ObservedGeneration: generation, LastTransitionTime: now}}
	}
	tmpl.Status = workv1alpha1.ResourceTemplateStatus{ObservedGeneration: tmpl.Generation, Conditions: conditions(tmpl.Generation),
		Clusters: targets, AggregatedStatus: aggregated(1), WorkloadStatus: replicaStatus(4)}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(hubMemoryNamespace).UpdateStatus(ctx, tmpl, metav1.UpdateOptions{FieldManager: "flotilla-hub"}); err != nil {
		return writes, err
	}
	writes++

	placementJSON, _ := json.Marshal(placement)
	bindingName := workobjects.BindingName("Deployment", name)
	rb := &workv1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bindingName, Namespace: hubMemoryNamespace,
			Labels: map[string]string{workobjects.LabelPropagationPolicyNamespace: hubMemoryNamespace,
				workobjects.LabelPropagationPolicyName: fmt.Sprintf("region-%d", region)},
			Annotations:     map[string]string{scheduler.AnnotationScheduledPlacement: string(placementJSON)},
			Finalizers:      []string{workobjects.BindingFinalizer},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}},
		Spec: workv1alpha1.ResourceBindingSpec{
			Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: hubMemoryNamespace, Name: name, UID: tmpl.UID},
			Replicas: 4,
			ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Placement:          placement,
			ConflictResolution: policyv1alpha1.ConflictAbort,
			Clusters:           targets,
		},
	}
	if rb, err = fc.WorkV1alpha1().ResourceBindings(hubMemoryNamespace).Create(ctx, rb, metav1.CreateOptions{FieldManager: "flotilla-hub"}); err != nil {
		return writes, err
	}
	writes++
	rb.Status = workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: rb.Generation, LastScheduledTime: &now,
		Conditions: conditions(rb.Generation), AggregatedStatus: aggregated(rb.Generation),
		SchedulingDecision: decisionOfFill(now, selected, unselected, perRegion)}
	if _, err := fc.WorkV1alpha1().ResourceBindings(hubMemoryNamespace).UpdateStatus(ctx, rb, metav1.UpdateOptions{FieldManager: "flotilla-hub"}); err != nil {
		return writes, err
	}
	writes++

	for _, cluster := range selected {
		raw, _ := json.Marshal(hubMemoryDeployment(name, fmt.Sprintf("region-%d", region), 2))
		w := &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Name: workobjects.WorkName(hubMemoryNamespace, bindingName), Namespace: clusterlifecycle.Namespace(cluster),
				Labels: map[string]string{workobjects.LabelBindingUID: string(rb.UID)},
				Annotations: map[string]string{workobjects.AnnotationBindingNamespace: hubMemoryNamespace, workobjects.AnnotationBindingName: bindingName,
					workobjects.AnnotationCluster: cluster, workv1alpha1.AnnotationTemplateGeneration: "1"},
				Finalizers: []string{workv1alpha1.ExecutionFinalizer}},
			Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: k8sruntime.RawExtension{Raw: raw}}}},
				ApplyStrategy: workv1alpha1.ApplyStrategyServerSideApply, ConflictResolution: policyv1alpha1.ConflictAbort},
		}
		if w, err = fc.WorkV1alpha1().Works(w.Namespace).Create(ctx, w, metav1.CreateOptions{FieldManager: "flotilla-hub"}); err != nil {
			return writes, err
		}
		writes++
		gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
		w.Status = workv1alpha1.WorkStatus{
			Conditions: []metav1.Condition{
				{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue, Reason: "AppliedSuccessful", Message: "1 manifests applied",
					ObservedGeneration: w.Generation, LastTransitionTime: now},
				{Type: workv1alpha1.WorkConditionAvailable, Status: metav1.ConditionTrue, Reason: "Available", Message: "every applied object is healthy",
					ObservedGeneration: w.Generation, LastTransitionTime: now}},
			ManifestStatuses: []workv1alpha1.ManifestStatus{{Identifier: workv1alpha1.ResourceIdentifier{Ordinal: 0, Group: gvk.Group, Version: gvk.Version,
				Kind: gvk.Kind, Resource: "deployments", Namespace: hubMemoryNamespace, Name: name}, Status: replicaStatus(2), Health: workv1alpha1.ResourceHealthy}},
		}
		if _, err := fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{FieldManager: "flotilla-agent"}); err != nil {
			return writes, err
		}
		writes++
	}
	return writes, nil
}

// hubMemoryDeployment is the propagation benchmark's Deployment.
func hubMemoryDeployment(name, region string, replicas int) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": hubMemoryNamespace, "labels": map[string]any{"app": name, "region": region}},
		"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}}}}}}}}
}

// parallel runs f on every item with hubMemoryWorkers workers and returns
// the first error.
func parallel(ctx context.Context, items []int, f func(int) error) error {
	ch := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range hubMemoryWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				if err := f(i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for _, i := range items {
		select {
		case ch <- i:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// decisionOfFill is the decision the scheduler records for a binding of
// the fill: its 2 clusters selected, then the other clusters of its
// region (which the spread leaves out), then clusters other regions'
// affinity filters out, up to MaxUnselectedClusterDecisions, as at 100
// clusters in the propagation benchmark (~3.6 KB of JSON).
func decisionOfFill(now metav1.Time, selected []string, unselected string, perRegion int) *workv1alpha1.SchedulingDecision {
	score := func(s int32) *int32 { return &s }
	d := &workv1alpha1.SchedulingDecision{DecidedTime: now,
		FilteredCounts:  []workv1alpha1.FilterCount{{Reason: workv1alpha1.DecisionClusterAffinityMismatch, Count: int32(4 * perRegion)}},
		OmittedClusters: int32(5*perRegion - 2 - workv1alpha1.MaxUnselectedClusterDecisions)}
	for _, c := range selected {
		d.Clusters = append(d.Clusters, workv1alpha1.ClusterDecision{ClusterName: c, Selected: true, Replicas: 2, Score: score(0),
			Reason: workv1alpha1.DecisionSelected, Message: "new; static weight 1"})
	}
	for k := 0; len(d.Clusters) < 2+workv1alpha1.MaxUnselectedClusterDecisions; k++ {
		c := hubMemoryCluster(k)
		if slices.Contains(selected, c) {
			continue
		}
		if k < perRegion && c != unselected {
			d.Clusters = append(d.Clusters, workv1alpha1.ClusterDecision{ClusterName: c, Score: score(0), Reason: workv1alpha1.DecisionNotSelectedBySpread,
				Message: "the spread constraint by cluster takes at most 2 clusters; higher-scored ones were picked"})
			continue
		}
		d.Clusters = append(d.Clusters, workv1alpha1.ClusterDecision{ClusterName: c, Reason: workv1alpha1.DecisionClusterAffinityMismatch,
			Message: "cluster affinity: not in region " + c})
	}
	return d
}
