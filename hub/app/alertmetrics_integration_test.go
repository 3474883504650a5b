package app_test

import (
	"context"
	"net"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The metrics the monitoring mixin's alerts read move in the real hub:
// flotilla_hub_works_not_applied counts a Work until its agent reports it
// applied (FlotillaWorksNotApplied), and
// flotilla_hub_cluster_noexecute_taint_since_timestamp_seconds follows a
// cluster's NoExecute taint, an admin's included (FlotillaClusterNoExecuteTooLong).
func TestAlertMetricsFollowWorksAndTaints(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	// The namespace controller (kube-controller-manager) removes a deleted
	// cluster's namespace, which its removal waits for.
	_, ctx, fc := startHubEnv(t, func(o *app.Options) {
		o.MetricsBindAddress = metricsAddr
		// The test writes Ready as an agent would; no Lease renewals.
		o.ClusterStartupGracePeriod, o.ClusterMonitorGracePeriod = time.Hour, time.Hour
	}, testenv.WithControllerManager())
	createReadyClusters(t, ctx, fc, "member1", "member2")

	ns := "default"
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(nginxManifest)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	work := waitWork(t, fc, "member1", ns, "nginx-deployment", func(*unstructured.Unstructured) bool { return true })

	// No agent has answered: pending on member1; member2 is counted at 0.
	alertMetricWait(t, metricsAddr, `flotilla_hub_works_not_applied{cluster="member1",state="pending"}`, "1")
	alertMetricWait(t, metricsAddr, `flotilla_hub_works_not_applied{cluster="member2",state="pending"}`, "0")
	reportApplied(t, fc, work, 3)
	alertMetricWait(t, metricsAddr, `flotilla_hub_works_not_applied{cluster="member1",state="pending"}`, "0")

	// An admin's NoExecute taint on member2 (nothing runs there), with its
	// timeAdded: the gauge holds that time; without the taint, no series.
	added := metav1.NewTime(time.Unix(1700000000, 0))
	alertMetricSetTaints(t, ctx, fc, "member2", []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}})
	alertMetricWait(t, metricsAddr, `flotilla_hub_cluster_noexecute_taint_since_timestamp_seconds{cluster="member2"}`, "1.7e+09")
	alertMetricSetTaints(t, ctx, fc, "member2", nil)
	alertMetricWait(t, metricsAddr, `flotilla_hub_cluster_noexecute_taint_since_timestamp_seconds{cluster="member2"}`, "")

	// A deleted cluster leaves no series behind: a last Ready=False kept
	// would page FlotillaClusterNotReady for a cluster that is gone (the
	// e2e Monitoring spec found member4 and member5 of an earlier spec
	// still exported).
	alertMetricWait(t, metricsAddr, `flotilla_hub_cluster_ready{cluster="member2",status="True"}`, "1")
	if err := fc.ClusterV1alpha1().Clusters().Delete(ctx, "member2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{
		`flotilla_hub_cluster_ready{cluster="member2",status="True"}`,
		`flotilla_hub_cluster_ready{cluster="member2",status="False"}`,
		`flotilla_hub_cluster_lease_age_seconds{cluster="member2"}`,
		`flotilla_hub_works_not_applied{cluster="member2",state="pending"}`,
	} {
		alertMetricWait(t, metricsAddr, series, "")
	}
	alertMetricWait(t, metricsAddr, `flotilla_hub_cluster_ready{cluster="member1",status="True"}`, "1")
}

// alertMetricSetTaints replaces a cluster's taints, retrying on conflicts.
func alertMetricSetTaints(t *testing.T, ctx context.Context, fc flotillaclient.Interface, name string, taints []corev1.Taint) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := fc.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.Taints = taints
		_, err = fc.ClusterV1alpha1().Clusters().Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// alertMetricWait polls the hub's /metrics until the series has value want
// ("" = the series is absent).
func alertMetricWait(t *testing.T, addr, series, want string) {
	t.Helper()
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	var got string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, body, err := testenv.HTTPGet(ctx, addr, "/metrics")
		if err != nil {
			return false, nil
		}
		got = ""
		if m := line.FindStringSubmatch(body); m != nil {
			got = m[1]
		}
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("%s = %q, want %q", series, got, want)
	}
}
