package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
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
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Tests of the failover history (issue 18 item 6) with the real hub and a
// real apiserver. Helpers are prefixed fh to stay clear of other files of
// app_test.

const fhBinding = "nginx-deployment"

type fhHub struct {
	ctx  context.Context
	fc   flotillaclient.Interface
	kube kubernetes.Interface
	env  *testenv.Env
	// stop stops the hub and waits until it has.
	stop func()
}

// run starts a hub on h.env with short failover timers and no
// Lease-driven Ready changes (the test writes Ready as an agent would),
// serving metrics at metricsAddr ("0": none), until stop or the test ends.
func (h *fhHub) run(t *testing.T, metricsAddr string) {
	t.Helper()
	opts := app.NewOptions()
	opts.Kubeconfig = h.env.KubeconfigFor(t, h.env.Config)
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = metricsAddr, "0"
	opts.ClusterStartupGracePeriod, opts.ClusterMonitorGracePeriod = time.Hour, time.Hour
	opts.ClusterMonitorPeriod = time.Second
	opts.FailoverEvictionTimeout = time.Second
	opts.DefaultNotReadyTolerationSeconds, opts.DefaultUnreachableTolerationSeconds = 0, 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("hub: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
}

// fhStart runs the hub with three Ready clusters (so one down is not a
// disruption to the fleet guard), and the seed's nginx divided 1:2 over
// member1 and member2, each copy reporting all its replicas available.
func fhStart(t *testing.T, failover *policyv1alpha1.FailoverBehavior) *fhHub {
	t.Helper()
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &fhHub{ctx: ctx, fc: flotillaclient.NewForConfigOrDie(env.Config), kube: kubernetes.NewForConfigOrDie(env.Config), env: env}
	h.run(t, "0")
	fc := h.fc
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	ns := "default"
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
						{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 2},
					}},
				},
			},
			Failover: failover,
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, fc, ns, fhBinding, map[string]int32{"member1": 1, "member2": 2})
	h.report(t, "member1", 1, 1, workv1alpha1.ResourceHealthy)
	h.report(t, "member2", 2, 2, workv1alpha1.ResourceHealthy)
	return h
}

// report writes what cluster's agent reports for the current Work:
// applied, with available of wanted replicas available.
func (h *fhHub) report(t *testing.T, cluster string, wanted, available int, health workv1alpha1.ResourceHealth) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%s reports %d/%d", cluster, available, wanted), func() (bool, error) {
		cur, err := h.fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(h.ctx, workobjects.WorkName("default", fhBinding), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if got := replicasOf(manifestOf(t, cur)); got != int64(wanted) {
			return false, nil // not yet the Work we mean
		}
		status := fmt.Sprintf(`{"replicas":%d,"readyReplicas":%d,"availableReplicas":%d,"updatedReplicas":%d}`, wanted, available, available, wanted)
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", Message: "applied", ObservedGeneration: cur.Generation})
		cur.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "default", Name: "nginx"},
			Status:     &runtime.RawExtension{Raw: []byte(status)}, Health: health}}
		_, err = h.fc.WorkV1alpha1().Works(cur.Namespace).UpdateStatus(h.ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func (h *fhHub) binding(t *testing.T) *workv1alpha1.ResourceBinding {
	t.Helper()
	rb, err := h.fc.WorkV1alpha1().ResourceBindings("default").Get(h.ctx, fhBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// waitLast waits until the newest history item satisfies ok, and returns
// the binding.
func (h *fhHub) waitLast(t *testing.T, what string, ok func(*workv1alpha1.FailoverHistoryItem) bool) *workv1alpha1.ResourceBinding {
	t.Helper()
	var rb *workv1alpha1.ResourceBinding
	waitUntil(t, what, func() (bool, error) {
		var err error
		rb, err = h.fc.WorkV1alpha1().ResourceBindings("default").Get(h.ctx, fhBinding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		n := len(rb.Status.FailoverHistory)
		return n > 0 && ok(&rb.Status.FailoverHistory[n-1]), nil
	})
	return rb
}

func (h *fhHub) waitEvent(t *testing.T, reason, substr string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("event %s %q", reason, substr), func() (bool, error) {
		list, err := h.kube.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, nil
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool { return strings.Contains(e.Message, substr) }), nil
	})
}

// table asks the apiserver for the bindings as `kubectl get rb` does (a
// Table, with the CRD's printer columns) and returns the named cells of
// the binding's row.
func (h *fhHub) table(t *testing.T) map[string]any {
	t.Helper()
	raw, err := h.kube.CoreV1().RESTClient().Get().AbsPath("/apis/work.flotilla.io/v1alpha1/namespaces/default/resourcebindings").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatalf("not a Table: %v: %s", err, raw)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1: %s", len(table.Rows), raw)
	}
	out := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		out[c.Name] = table.Rows[0].Cells[i]
	}
	return out
}

// showForDocs prints `kubectl get rb -o wide` and the history's YAML with
// the real kubectl when FLOTILLA_SHOW_KUBECTL is set (docs/failover.md's
// "Failover history" output comes from here).
func (h *fhHub) showForDocs(t *testing.T) {
	t.Helper()
	if os.Getenv("FLOTILLA_SHOW_KUBECTL") == "" {
		return
	}
	kubeconfig := h.env.KubeconfigFor(t, h.env.Config)
	for _, args := range [][]string{{"get", "rb", "-o", "wide"}, {"get", "rb", fhBinding, "-o", "jsonpath={.status.failoverHistory}"}} {
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig, "-n", "default"}, args...)...).CombinedOutput()
		if err != nil {
			t.Logf("kubectl %v: %v", args, err)
		}
		if args[len(args)-1] == "wide" {
			t.Logf("$ kubectl get rb -o wide\n%s", out)
			continue
		}
		y, _ := yaml.JSONToYAML(out)
		t.Logf("$ kubectl get rb %s -o jsonpath='{.status.failoverHistory}'  # as YAML\n%s", fhBinding, y)
	}
	out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", "default", "describe", "rb", fhBinding).CombinedOutput()
	if err != nil {
		t.Logf("kubectl describe: %v", err)
	}
	if i := strings.Index(string(out), "Events:"); i >= 0 {
		t.Logf("$ kubectl describe rb %s  # the end\n%s", fhBinding, out[i:])
	}
}

// A cluster failover (member1 stops being Ready, its NoExecute taint
// evicts nginx's 1 replica) produces one history item: TaintUntolerated
// from member1, before [member1 member2], after [member2], Gracefully; it
// stays open, degraded (member1 is down, member2 runs 2 of 3), until
// member2 reports 3/3 for the current Work, then closes with the time it
// was degraded. Events say so, and `kubectl get rb` shows it.
func TestFailoverHistoryClusterFailover(t *testing.T) {
	t.Parallel()
	h := fhStart(t, nil)
	c, err := h.fc.ClusterV1alpha1().Clusters().Get(h.ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setClusterReady(t, h.ctx, h.fc, c, metav1.ConditionFalse)
	waitReplicas(t, h.fc, "default", fhBinding, map[string]int32{"member2": 3})

	rb := h.waitLast(t, "an open item with clustersAfterFailover", func(it *workv1alpha1.FailoverHistoryItem) bool {
		return slices.Equal(it.ClustersAfterFailover, []string{"member2"})
	})
	if n := len(rb.Status.FailoverHistory); n != 1 {
		t.Fatalf("%d history items, want 1: %+v", n, rb.Status.FailoverHistory)
	}
	it := rb.Status.FailoverHistory[0]
	if it.Reason != workv1alpha1.EvictionReasonTaintUntolerated || it.OriginCluster != "member1" ||
		!slices.Equal(it.ClustersBeforeFailover, []string{"member1", "member2"}) || it.PurgeMode != policyv1alpha1.PurgeModeGracefully ||
		!strings.Contains(it.Message, "NoExecute") || it.EndTime != nil || it.DegradedSince == nil {
		t.Fatalf("open item %+v", it)
	}
	if task := rb.Spec.GracefulEvictionTasks; len(task) != 1 || !task[0].CreationTimestamp.Equal(&it.StartTime) {
		t.Fatalf("item start %s, tasks %+v", it.StartTime, task)
	}
	h.waitEvent(t, "FailoverStarted", "Failing over from member1 (TaintUntolerated, purgeMode Gracefully)")
	if cells := h.table(t); cells["LAST-FAILOVER"] != "TaintUntolerated" || cells["FROM"] != "member1" {
		t.Errorf("kubectl get rb while failing over: %v", cells)
	}

	// The new copy on member2 comes up: 2 of 3, then (past 2 s of being
	// degraded) 3 of 3.
	h.report(t, "member2", 3, 2, workv1alpha1.ResourceUnhealthy)
	for time.Since(it.DegradedSince.Time) < 3*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if rb := h.binding(t); rb.Status.FailoverHistory[0].EndTime != nil {
		t.Fatalf("closed while member2 ran 2 of 3: %+v", rb.Status.FailoverHistory[0])
	}
	h.report(t, "member2", 3, 3, workv1alpha1.ResourceHealthy)
	rb = h.waitLast(t, "the item closed", func(it *workv1alpha1.FailoverHistoryItem) bool { return it.EndTime != nil })
	it = rb.Status.FailoverHistory[0]
	if len(rb.Status.FailoverHistory) != 1 || it.DegradedSince != nil || it.DegradedSeconds < 2 || it.EndTime.Before(&it.StartTime) ||
		!slices.Equal(it.ClustersAfterFailover, []string{"member2"}) {
		t.Fatalf("closed item %+v", rb.Status.FailoverHistory)
	}
	h.waitEvent(t, "FailoverCompleted", "Failed over from member1 to member2 (TaintUntolerated); 3/3 available after")
	cells := h.table(t)
	if cells["LAST-FAILOVER"] != "TaintUntolerated" || cells["FROM"] != "member1" || !strings.Contains(fmt.Sprint(cells["TO"]), "member2") {
		t.Errorf("kubectl get rb: %v", cells)
	}
	h.showForDocs(t)
}

// An application failover (nginx Unhealthy on member1 past its
// tolerationSeconds) produces one item: ApplicationFailure from member1 to
// member2, degraded while member2 runs 2 of 3 (member1's copy, still
// reporting, has none available), closed once member2 runs 3 of 3. The
// history is bounded: the binding already had FailoverHistoryLimit items
// (from an earlier life of the hub: all of it is in the status), and the
// oldest one goes.
func TestFailoverHistoryApplicationFailover(t *testing.T) {
	t.Parallel()
	toleration := int32(1)
	h := fhStart(t, &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeGracefully, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration}}})
	waitUntil(t, "an earlier history stored", func() (bool, error) {
		rb := h.binding(t)
		rb.Status.FailoverHistory = nil
		for i := range workv1alpha1.FailoverHistoryLimit {
			start := metav1.NewTime(time.Now().Add(-time.Duration(100-i) * time.Minute).Truncate(time.Second))
			end := metav1.NewTime(start.Add(30 * time.Second))
			rb.Status.FailoverHistory = append(rb.Status.FailoverHistory, workv1alpha1.FailoverHistoryItem{
				Reason: workv1alpha1.EvictionReasonTaintUntolerated, OriginCluster: fmt.Sprintf("earlier-%d", i),
				ClustersAfterFailover: []string{"member1", "member2"}, StartTime: start, EndTime: &end})
		}
		_, err := h.fc.WorkV1alpha1().ResourceBindings("default").UpdateStatus(h.ctx, rb, metav1.UpdateOptions{})
		return err == nil, nil
	})

	h.report(t, "member1", 1, 0, workv1alpha1.ResourceUnhealthy)
	waitReplicas(t, h.fc, "default", fhBinding, map[string]int32{"member2": 3})
	rb := h.waitLast(t, "an ApplicationFailure item placed", func(it *workv1alpha1.FailoverHistoryItem) bool {
		return it.Reason == workv1alpha1.EvictionReasonApplicationFailure && it.ClustersAfterFailover != nil
	})
	hist := rb.Status.FailoverHistory
	if len(hist) != workv1alpha1.FailoverHistoryLimit || hist[0].OriginCluster != "earlier-1" {
		t.Fatalf("history of %d items starting at %s, want %d starting at earlier-1 (the oldest dropped)", len(hist), hist[0].OriginCluster, workv1alpha1.FailoverHistoryLimit)
	}
	it := hist[len(hist)-1]
	if it.OriginCluster != "member1" || !slices.Equal(it.ClustersBeforeFailover, []string{"member1", "member2"}) ||
		!slices.Equal(it.ClustersAfterFailover, []string{"member2"}) || it.PurgeMode != policyv1alpha1.PurgeModeGracefully ||
		it.EndTime != nil || it.DegradedSince == nil {
		t.Fatalf("open item %+v", it)
	}
	h.report(t, "member2", 3, 2, workv1alpha1.ResourceUnhealthy)
	for time.Since(it.DegradedSince.Time) < 3*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	h.report(t, "member2", 3, 3, workv1alpha1.ResourceHealthy)
	rb = h.waitLast(t, "the item closed", func(it *workv1alpha1.FailoverHistoryItem) bool { return it.EndTime != nil })
	hist = rb.Status.FailoverHistory
	it = hist[len(hist)-1]
	if len(hist) != workv1alpha1.FailoverHistoryLimit || it.Reason != workv1alpha1.EvictionReasonApplicationFailure ||
		it.DegradedSince != nil || it.DegradedSeconds < 2 {
		t.Fatalf("closed item %+v (of %d)", it, len(hist))
	}
	h.waitEvent(t, "FailoverCompleted", "Failed over from member1 to member2 (ApplicationFailure); 3/3 available after")
	if cells := h.table(t); cells["LAST-FAILOVER"] != "ApplicationFailure" || cells["FROM"] != "member1" {
		t.Errorf("kubectl get rb: %v", cells)
	}
	h.showForDocs(t)
}

// The history survives a hub restart: the item opened by one hub (its
// failover under way, degraded) is continued by the next one, which
// neither opens it again nor announces it again, counts the degraded
// time across the restart, and observes the failover duration once.
func TestFailoverHistorySurvivesHubRestart(t *testing.T) {
	t.Parallel()
	h := fhStart(t, nil)
	c, err := h.fc.ClusterV1alpha1().Clusters().Get(h.ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setClusterReady(t, h.ctx, h.fc, c, metav1.ConditionFalse)
	rb := h.waitLast(t, "an open item with clustersAfterFailover", func(it *workv1alpha1.FailoverHistoryItem) bool {
		return slices.Equal(it.ClustersAfterFailover, []string{"member2"}) && it.DegradedSince != nil
	})
	opened := rb.Status.FailoverHistory[0]
	h.waitEvent(t, "FailoverStarted", "Failing over from member1")

	h.stop()
	// While no hub runs, member2 brings up 2 of 3.
	h.report(t, "member2", 3, 2, workv1alpha1.ResourceUnhealthy)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	h.run(t, metricsAddr)
	for time.Since(opened.DegradedSince.Time) < 3*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	h.report(t, "member2", 3, 3, workv1alpha1.ResourceHealthy)
	rb = h.waitLast(t, "the item closed by the second hub", func(it *workv1alpha1.FailoverHistoryItem) bool { return it.EndTime != nil })
	if n := len(rb.Status.FailoverHistory); n != 1 {
		t.Fatalf("%d items after the restart, want the one: %+v", n, rb.Status.FailoverHistory)
	}
	it := rb.Status.FailoverHistory[0]
	if !it.StartTime.Equal(&opened.StartTime) || it.DegradedSince != nil || it.DegradedSeconds < 2 {
		t.Fatalf("item after the restart %+v, opened as %+v", it, opened)
	}
	h.waitEvent(t, "FailoverCompleted", "Failed over from member1 to member2 (TaintUntolerated); 3/3 available")
	list, err := h.kube.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{FieldSelector: "reason=FailoverStarted,involvedObject.kind=ResourceBinding"})
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, e := range list.Items {
		started += int(max(e.Count, 1))
	}
	if started != 1 {
		t.Errorf("%d FailoverStarted events on the binding, want 1 (the second hub must not announce it again)", started)
	}
	// The second hub observed the duration once and wrote the history for
	// the close only: the reports and the other controllers' writes it saw
	// before changed nothing it records. The close is one write, or two
	// when the hub looks between the graceful eviction's end (a new binding
	// generation) and the binding controller's status for it: degraded
	// ends first (3/3 available), the item closes on the current
	// generation's status.
	for _, series := range []struct {
		name string
		max  int
	}{{`flotilla_hub_failover_duration_seconds_count{reason="TaintUntolerated"}`, 1},
		{`flotilla_api_requests_total{client="failover-history",code="200",method="PATCH"}`, 2}} {
		waitUntil(t, fmt.Sprintf("%s in 1..%d", series.name, series.max), func() (bool, error) {
			resp, err := http.Get("http://" + metricsAddr + "/metrics")
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return false, nil
			}
			for _, line := range strings.Split(string(body), "\n") {
				if v, ok := strings.CutPrefix(line, series.name+" "); ok {
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 || n > series.max {
						return false, fmt.Errorf("%s, want 1..%d", line, series.max)
					}
					return true, nil
				}
			}
			return false, nil
		})
	}
}
