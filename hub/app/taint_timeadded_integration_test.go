package app_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/taintmanager"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// Issue 31 item 2: a NoExecute taint written the kubectl way (no
// timeAdded) on a cluster whose workload tolerates it for N seconds. The
// hub stamps timeAdded on first sight; the hub restarts halfway through
// the toleration; the workload is still evicted N seconds after the taint
// appeared (a restart that reset the clock would evict N seconds after the
// restart; the old hub, reading the missing time as now on every pass,
// never evicted), with the eviction event on the binding.
func TestHandWrittenTaintEvictsAfterTolerationAcrossRestart(t *testing.T) {
	t.Parallel()
	const toleration = 12 * time.Second
	env := testenv.Start(t)
	tune := func(o *app.Options) {
		o.LeaderElection.LeaderElect = false
		o.MetricsBindAddress = "0"
		o.BindingStatusHold = time.Second
	}
	_, stopFirst := runHub(t, env, tune)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	kc := kubernetes.NewForConfigOrDie(env.Config)

	createReadyClusters(t, ctx, fc, "member1", "member2")
	ns := "default"
	seconds := int64(toleration / time.Second)
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				ClusterTolerations: []corev1.Toleration{{Key: "example.com/maintenance", Operator: corev1.TolerationOpExists,
					Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds}},
			},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(nginxManifest)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const binding = "nginx-deployment"
	waitReplicas(t, fc, ns, binding, map[string]int32{"member1": 3, "member2": 3})

	// kubectl-style: the taint without timeAdded.
	var tainted time.Time
	waitUntil(t, "member1 tainted", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute})
		tainted = time.Now()
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err == nil, nil
	})
	var stamp time.Time
	waitUntil(t, "timeAdded stamped on member1's taint", func() (bool, error) {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range c.Spec.Taints {
			if taint.Key == "example.com/maintenance" && taint.TimeAdded != nil {
				stamp = taint.TimeAdded.Time
				return true, nil
			}
		}
		return false, nil
	})
	if d := stamp.Sub(tainted); d < -time.Second || d > 2*time.Second {
		t.Fatalf("timeAdded %s is %s from when the taint was written", stamp, d)
	}

	// Halfway: the hub restarts. The new hub reads the stamp.
	time.Sleep(time.Until(tainted.Add(toleration / 3)))
	stopFirst()
	restarted := time.Now()
	runHub(t, env, tune)
	if rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{}); err != nil || len(rb.Spec.Clusters) != 2 {
		t.Fatalf("evicted before the toleration ran out: %+v %v", rb.Spec.Clusters, err)
	}
	waitReplicas(t, fc, ns, binding, map[string]int32{"member2": 3})
	evicted := time.Since(tainted)
	if evicted < toleration-time.Second {
		t.Fatalf("evicted %s after the taint, before its %s toleration", evicted, toleration)
	}
	if reset := restarted.Add(toleration).Sub(tainted); evicted > reset-time.Second {
		t.Fatalf("evicted %s after the taint: the restart at %s reset the clock", evicted, restarted.Sub(tainted))
	}
	t.Logf("taint at 0, stamp %s, restart at %s, evicted at %s (toleration %s)", stamp.Sub(tainted), restarted.Sub(tainted), evicted, toleration)
	c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, taint := range c.Spec.Taints {
		if taint.Key == "example.com/maintenance" && (taint.TimeAdded == nil || !taint.TimeAdded.Time.Equal(stamp)) {
			t.Fatalf("the restarted hub changed timeAdded: %v, was %s", taint.TimeAdded, stamp)
		}
	}
	waitUntil(t, "the eviction event on the binding", func() (bool, error) {
		events, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + binding + ",reason=" + taintmanager.EventEvictWorkload})
		return err == nil && len(events.Items) > 0, err
	})
}
