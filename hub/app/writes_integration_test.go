package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/e2e/framework"
	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/bindingstatus"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

var (
	writesReport    = flag.Bool("writes-report", false, "run the hub writes-per-template report (TestWritesPerTemplateReport)")
	writesTemplates = flag.Int("writes-templates", 500, "templates the writes report creates")
	writesClusters  = flag.Int("writes-clusters", 20, "Ready clusters the writes report registers")
)

// TestWritesPerTemplateReport measures the hub's API writes per template on
// the whole propagation path, in process and without make up: a real
// apiserver (envtest), the real hub, N Ready clusters, a PropagationPolicy
// Divided over 2 of them (as hack/bench/propagation's), M Deployment
// templates created at once, and a simulated agent per cluster that reports
// every Work Applied with a Healthy, fully available Deployment (the
// agent's writes are not the hub's). When every template's status shows
// FullyApplied, it prints the hub's flotilla_api_requests_total delta by
// client, method and code, per template, and the Events by reason. A
// report, not a pass/fail test:
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./hub/app/ -run WritesPerTemplateReport -v -writes-report \
//	  [-writes-templates 500] [-writes-clusters 20] -timeout 30m
func TestWritesPerTemplateReport(t *testing.T) {
	if !*writesReport {
		t.Skip("run with -writes-report")
	}
	r := measureWrites(t, *writesClusters, *writesTemplates, nil)
	t.Logf("hub writes per template, %d templates over %d clusters (2 each), all FullyApplied in %s:\n%s",
		r.templates, r.clusters, r.propagated.Round(time.Millisecond), r.table())
}

// Once every template is fully applied (2 clusters each), the hub has made
// at most six writes per template on the path: the detector's binding
// create and one template status, the scheduler's placement, the binding
// controller's two Works, and one binding status (the scheduler's
// condition and the binding controller's status together, bindingstatus);
// no Event for a routine step. Besides the path: one revision record per
// template change (a ControllerRevision, docs/rollout.md). A count, not a timing: the holds are set
// long enough for any machine, so an in-flight status is never due.
func TestHubWritesPerTemplate(t *testing.T) {
	t.Parallel()
	r := measureWrites(t, 4, 20, func(o *app.Options) {
		o.TemplateStatusHold, o.BindingStatusHold = 2*time.Minute, 2*time.Minute
	})
	t.Logf("writes per template:\n%s", r.table())
	for _, c := range []struct {
		client string
		max    float64
		what   string
	}{
		{"detector", 2, "binding create + one template status"},
		{"scheduler", 1, "the placement; its condition goes with the binding status"},
		{"binding", 2, "a Work per cluster, no status"},
		{"binding-status", 1, "one binding status"},
		// Off the path: the template's revision, recorded once per change
		// (a create that loses a race with the cache is retried: 1.05).
		{"binding-revisions", 1.2, "one revision record per template change"},
		{"events", 0, "no Event for a routine step"},
	} {
		if got := r.perTemplate(c.client); got > c.max {
			t.Errorf("%s writes per template = %.2f, want ≤ %v (%s)", c.client, got, c.max, c.what)
		}
	}
	var path float64
	for _, c := range []string{"detector", "scheduler", "binding", "binding-status", "events"} {
		path += r.perTemplate(c)
	}
	if path > 6 {
		t.Errorf("hub writes per template on the path = %.2f, want ≤ 6", path)
	}
	for reason, n := range r.eventsByReason {
		if reason == "ResourceTemplate/ApplyPolicySucceed" || reason == "ResourceBinding/ScheduleBindingSucceed" || reason == "ResourceBinding/ApplyPolicySucceed" {
			t.Errorf("%d %s events for %d new templates, want none (a routine step)", n, reason, r.templates)
		}
	}
}

// createWritesPolicy makes the writes harness's PropagationPolicy in ns:
// Deployments labelled bench=writes, Divided over 2 clusters (as
// hack/bench/propagation's).
func createWritesPolicy(t *testing.T, ctx context.Context, fc flotillaclient.Interface, ns string) {
	t.Helper()
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "writes", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "writes"}}}},
			Placement: policyv1alpha1.Placement{
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster,
					MinGroups: 2, MaxGroups: 2}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted},
			}}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// writesResult is what measureWrites saw.
type writesResult struct {
	clusters, templates int
	propagated          time.Duration
	// requests: the hub's flotilla_api_requests_total delta without GETs,
	// by `client method code`.
	requests       map[string]float64
	eventsByReason map[string]int
}

func (r writesResult) perTemplate(client string) float64 {
	var sum float64
	for k, v := range r.requests {
		if strings.HasPrefix(k, client+" ") {
			sum += v
		}
	}
	return sum / float64(r.templates)
}

func (r writesResult) table() string {
	var b strings.Builder
	keys := make([]string, 0, len(r.requests))
	byClient := map[string]float64{}
	var total float64
	for k, v := range r.requests {
		keys = append(keys, k)
		byClient[strings.Fields(k)[0]] += v
		total += v
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "| client | method | code | writes | per template |\n|---|---|---|---|---|\n")
	for _, k := range keys {
		f := strings.Fields(k)
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.2f |\n", f[0], f[1], f[2], r.requests[k], r.requests[k]/float64(r.templates))
	}
	clients := make([]string, 0, len(byClient))
	for c := range byClient {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		fmt.Fprintf(&b, "%s: %.2f per template\n", c, byClient[c]/float64(r.templates))
	}
	fmt.Fprintf(&b, "hub total: %.0f writes, %.2f per template\n", total, total/float64(r.templates))
	reasons := make([]string, 0, len(r.eventsByReason))
	for reason := range r.eventsByReason {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		fmt.Fprintf(&b, "events %s: %d (%.2f per template)\n", reason, r.eventsByReason[reason], float64(r.eventsByReason[reason])/float64(r.templates))
	}
	return b.String()
}

// measureWrites runs the hub with tune applied, registers clusters Ready
// clusters, creates templates Deployment templates, plays their agents and
// returns the hub's writes from the first template's create until every
// template is FullyApplied and the hub has gone quiet.
func measureWrites(t *testing.T, clusters, templates int, tune func(*app.Options)) writesResult {
	t.Helper()
	metricsAddr := testenv.FreeAddr(t)
	env, ctx, _ := startHubEnv(t, func(o *app.Options) {
		o.MetricsBindAddress = metricsAddr
		// The test writes Ready as an agent would; no Lease renewals.
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
		// What a production hub holds (startHubEnv shortens it).
		o.BindingStatusHold = bindingstatus.DefaultHold
		if tune != nil {
			tune(o)
		}
	})
	// The test's own client must not be what limits the pace.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	fc := flotillaclient.NewForConfigOrDie(cfg)
	kc := kubernetes.NewForConfigOrDie(cfg)

	// The hub's namespace, where it keeps the templates' revisions, as an
	// install has it.
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := make([]string, clusters)
	for i := range names {
		names[i] = fmt.Sprintf("member%02d", i)
	}
	createReadyClusters(t, ctx, fc, names...)
	waitUntil(t, "no cluster has a hub taint", func() (bool, error) {
		list, err := fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range list.Items {
			if len(c.Spec.Taints) > 0 {
				return false, nil
			}
		}
		return len(list.Items) == clusters, nil
	})
	go framework.SimulateWorkAgents(ctx, fc, framework.WorkAgentOptions{})

	ns := "default"
	createWritesPolicy(t, ctx, fc, ns)
	// The detector sees the policy before the first template.
	time.Sleep(time.Second)
	before := scrapeHubWrites(t, metricsAddr)
	eventsBefore := eventReasons(t, ctx, kc, ns)

	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				name := fmt.Sprintf("app-%05d", i)
				raw, _ := json.Marshal(writesDeployment(name))
				tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}}}
				if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
					t.Errorf("creating template %s: %v", name, err)
				}
			}
		}()
	}
	for i := range templates {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	waitTemplatesFullyApplied(t, ctx, fc, ns, templates, 20*time.Minute)
	propagated := time.Since(start)
	// Writes still under way (e.g. Events being sent) count too: wait until
	// two scrapes a few seconds apart agree.
	after := scrapeHubWrites(t, metricsAddr)
	for range 30 {
		time.Sleep(3 * time.Second)
		next := scrapeHubWrites(t, metricsAddr)
		same := len(next) == len(after)
		for k, v := range next {
			same = same && after[k] == v
		}
		after = next
		if same {
			break
		}
	}
	r := writesResult{clusters: clusters, templates: templates, propagated: propagated, requests: map[string]float64{},
		eventsByReason: map[string]int{}}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			r.requests[k] = d
		}
	}
	for reason, n := range eventReasons(t, ctx, kc, ns) {
		if d := n - eventsBefore[reason]; d > 0 {
			r.eventsByReason[reason] = d
		}
	}
	return r
}

func writesDeployment(name string) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": name, "bench": "writes"}},
		"spec": map[string]any{"replicas": 4, "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27",
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}}}}}}}}
}

// scrapeHubWrites reads the hub's flotilla_api_requests_total without GETs,
// keyed `client method code`.
func scrapeHubWrites(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping the hub: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "flotilla_api_requests_total{")
		if !ok {
			continue
		}
		labelText, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(labelText, ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		if labels["method"] == "GET" {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out[labels["client"]+" "+labels["method"]+" "+labels["code"]] += n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// eventReasons counts the namespace's Events by reason, each aggregated
// Event as often as it happened.
func eventReasons(t *testing.T, ctx context.Context, kc kubernetes.Interface, ns string) map[string]int {
	t.Helper()
	list, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range list.Items {
		out[e.InvolvedObject.Kind+"/"+e.Reason] += int(max(e.Count, 1))
	}
	return out
}

// A template whose binding stays in flight (here: no agent ever reports its
// Works) still shows where it runs once the hold is over: the hold delays
// an in-flight status, it never hides it.
func TestTemplateStatusInFlightIsWrittenAfterTheHold(t *testing.T) {
	t.Parallel()
	ctx, fc := startHubWith(t, func(o *app.Options) {
		o.TemplateStatusHold = 2 * time.Second
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	createReadyClusters(t, ctx, fc, "member1", "member2")
	ns := "default"
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}}}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the template shows Propagated, Scheduled to 2 clusters, not FullyApplied", func() (bool, error) {
		rt, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		applied := meta.FindStatusCondition(rt.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
		return meta.IsStatusConditionTrue(rt.Status.Conditions, workobjects.TemplateConditionPropagated) &&
			meta.IsStatusConditionTrue(rt.Status.Conditions, workv1alpha1.BindingConditionScheduled) &&
			len(rt.Status.Clusters) == 2 && applied != nil && applied.Status == metav1.ConditionFalse, nil
	})
}
