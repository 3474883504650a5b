package app_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The scheduler records each cluster's filter and score result in the
// binding's status.schedulingDecision, for namespaced and cluster-scoped
// bindings and for an unschedulable one, and writes it only with a status
// write that happens anyway: a taint change on a cluster the binding does
// not use re-runs the (Duplicated) binding's schedule but writes nothing.
func TestSchedulingDecisionRecorded(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	ctx, fc := startHubWith(t, func(o *app.Options) {
		o.MetricsBindAddress = metricsAddr
		// The test writes Ready as an agent would; no Lease renewals.
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	})
	createReadyClusters(t, ctx, fc, "member1", "member2", "member3")
	sdSetTaint(t, ctx, fc, "member2", "maintenance", "kernel")
	sdSetTaint(t, ctx, fc, "member3", "reserved", "ops")
	// The hub's start-up not-ready taints go once it sees Ready; until
	// then a decision could name them (the first untolerated taint), and
	// their removal alone rewrites no decision.
	waitUntil(t, "no cluster has a hub taint", func() (bool, error) {
		list, err := fc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range list.Items {
			for _, taint := range c.Spec.Taints {
				if strings.HasPrefix(taint.Key, "cluster.flotilla.io/") {
					return false, nil
				}
			}
		}
		return len(list.Items) == 3, nil
	})

	ns := "default"
	affinity12 := &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}
	duplicated := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns}, Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: affinity12, ReplicaScheduling: duplicated}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "nginx", nginxManifest), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Unschedulable: its only cluster has an untolerated taint (not
	// member2's, which changes below).
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member3"}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx,
		rtOf(ns, "settings", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"b"}}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Cluster-scoped: the same path through a ClusterResourceBinding.
	if _, err := fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Namespace", Name: "team-a"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: affinity12}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, &workv1alpha1.ClusterResourceTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	binding := "nginx-deployment"
	getNginx := func() (*workv1alpha1.ResourceBinding, error) {
		return fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
	}
	want := []string{"member1 Selected 3 score=0 new", "member2 TaintUntolerated 0 untolerated taint maintenance=kernel:NoSchedule",
		`member3 ClusterAffinityMismatch 0 does not match the placement's cluster affinity`}
	rb := sdWaitDecision(t, "the Deployment's decision", getNginx, want)
	if len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Name != "member1" {
		t.Fatalf("scheduled to %v, want member1", rb.Spec.Clusters)
	}
	sdWaitDecision(t, "the unschedulable ConfigMap's decision", func() (*workv1alpha1.ResourceBinding, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, "settings-configmap", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionScheduled); c == nil || c.Status != metav1.ConditionFalse {
			return nil, nil
		}
		return rb, nil
	}, []string{`member1 ClusterAffinityMismatch 0 does not match`, `member2 ClusterAffinityMismatch 0 does not match`,
		"member3 TaintUntolerated 0 untolerated taint reserved=ops:NoSchedule"})
	sdWaitDecision(t, "the Namespace's ClusterResourceBinding decision", func() (*workv1alpha1.ResourceBinding, error) {
		crb, err := fc.WorkV1alpha1().ClusterResourceBindings().Get(ctx, workobjects.BindingName("Namespace", "team-a"), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return workobjects.FromClusterBinding(crb), nil
	}, []string{"member1 Selected 0 score=0 new", "member2 TaintUntolerated 0 untolerated taint maintenance=kernel:NoSchedule",
		`member3 ClusterAffinityMismatch 0 does not match`})

	// A taint change on member2, which the binding does not use, re-runs
	// its schedule (Duplicated bindings are re-checked on every cluster
	// change) but writes nothing: the result and the Scheduled condition
	// are the same, and the decision alone is no reason to write. The
	// scheduler's attempts counter says when the re-checks of the two
	// Duplicated bindings (the Deployment, the Namespace) ran; its PUT
	// counter, that it wrote nothing. Both counters only grow and the hub
	// is otherwise idle, so this waits for events, not for time to pass.
	// (An early re-check left over from the setup could only make this
	// pass too soon, never fail: the decision's decidedTime is checked
	// again below, after the next write.)
	attempts := `flotilla_scheduler_schedule_attempts_total{result="scheduled",schedule_type="DuplicatedReconcile"}`
	puts := `flotilla_api_requests_total{client="scheduler",code="200",method="PUT"}`
	attempts0, puts0 := sdMetric(t, metricsAddr, attempts), sdMetric(t, metricsAddr, puts)
	before, err := getNginx()
	if err != nil {
		t.Fatal(err)
	}
	sdSetTaint(t, ctx, fc, "member2", "maintenance", "disk")
	waitUntil(t, "the scheduler re-checks both Duplicated bindings after the taint change", func() (bool, error) {
		return sdMetric(t, metricsAddr, attempts) >= attempts0+2, nil
	})
	if n := sdMetric(t, metricsAddr, puts); n != puts0 {
		t.Errorf("scheduler PUTs went from %v to %v on a taint change that changes no result", puts0, n)
	}
	after, err := getNginx()
	if err != nil {
		t.Fatal(err)
	}
	if !after.Status.SchedulingDecision.DecidedTime.Equal(&before.Status.SchedulingDecision.DecidedTime) ||
		!strings.Contains(sdDescribe(after.Status.SchedulingDecision)[1], "maintenance=kernel") {
		t.Errorf("decision rewritten without a schedule: %v", sdDescribe(after.Status.SchedulingDecision))
	}

	// A write that happens anyway (the placement now admits member3, which
	// its taint keeps out: the result stands, lastScheduledTime moves)
	// carries the decision with member2's current taint.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}}
		_, err = fc.PolicyV1alpha1().PropagationPolicies(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sdWaitDecision(t, "the decision of the new placement", getNginx, []string{"member1 Selected 3 score=100 kept: already ran 3 replicas",
		"member2 TaintUntolerated 0 untolerated taint maintenance=disk:NoSchedule", "member3 TaintUntolerated 0 untolerated taint reserved=ops:NoSchedule"})
	if n := sdMetric(t, metricsAddr, puts); n <= puts0 {
		t.Errorf("scheduler PUTs %v after the placement change, want more than %v", n, puts0)
	}
}

// sdSetTaint sets member's key=value:NoSchedule taint.
func sdSetTaint(t *testing.T, ctx context.Context, fc flotillaclient.Interface, member, key, value string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, taint := range c.Spec.Taints {
			if taint.Key != key {
				taints = append(taints, taint)
			}
		}
		c.Spec.Taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule})
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// sdDescribe renders a decision's entries as "cluster Reason replicas
// [score=N] message", in order.
func sdDescribe(d *workv1alpha1.SchedulingDecision) []string {
	if d == nil {
		return nil
	}
	var out []string
	for _, c := range d.Clusters {
		s := fmt.Sprintf("%s %s %d", c.ClusterName, c.Reason, c.Replicas)
		if c.Score != nil {
			s += fmt.Sprintf(" score=%d", *c.Score)
		}
		out = append(out, s+" "+c.Message)
	}
	return out
}

// sdWaitDecision waits until get's binding has a decision whose entries
// start with the prefixes of want, in order and no more, and returns it.
func sdWaitDecision(t *testing.T, what string, get func() (*workv1alpha1.ResourceBinding, error), want []string) *workv1alpha1.ResourceBinding {
	t.Helper()
	var last []string
	var rb *workv1alpha1.ResourceBinding
	err := func() error {
		deadline := time.Now().Add(60 * time.Second)
		for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			got, err := get()
			if err != nil || got == nil {
				continue
			}
			last = sdDescribe(got.Status.SchedulingDecision)
			if len(last) != len(want) {
				continue
			}
			ok := true
			for i := range want {
				ok = ok && strings.HasPrefix(last[i], want[i])
			}
			if ok {
				rb = got
				return nil
			}
		}
		return fmt.Errorf("timed out")
	}()
	if err != nil {
		t.Fatalf("waiting for %s: %v; last decision:\n%s\nwant prefixes:\n%s", what, err, strings.Join(last, "\n"), strings.Join(want, "\n"))
	}
	return rb
}

// sdMetric is the sum of the hub's series named exactly series (name and
// labels as the text format prints them); 0 when absent.
func sdMetric(t *testing.T, addr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping the hub: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			sum += n
		}
	}
	return sum
}
