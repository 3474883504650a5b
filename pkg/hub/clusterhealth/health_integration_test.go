package clusterhealth_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterhealth"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// A cluster that has no Lease at all (never made, or deleted while the hub
// was down) is silent, not healthy: its Ready, even if an agent once
// reported True, turns Unknown after the startup grace period counted from
// when this hub first saw it.
func TestClusterWithoutLeaseGoesUnknown(t *testing.T) {
	env := testenv.Start(t)
	flotilla, err := flotillaclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := flotilla.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"},
		Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue,
		Reason: clusterv1alpha1.ClusterReasonReady, Message: "reported by an agent long gone"})
	if _, err := flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := flotillainformers.NewSharedInformerFactory(flotilla, 0)
	kubeFactory := informers.NewSharedInformerFactoryWithOptions(env.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = clusterlifecycle.LabelCluster }))
	const startupGrace = 3 * time.Second
	health := clusterhealth.NewController(flotilla, factory.Cluster().V1alpha1().Clusters().Informer(), kubeFactory.Coordination().V1().Leases().Informer(),
		clusterhealth.Options{MonitorPeriod: time.Second, GracePeriod: 2 * time.Second, StartupGracePeriod: startupGrace})
	runCtx, cancel := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	kubeFactory.Start(runCtx.Done())
	done := make(chan struct{})
	go func() { defer close(done); health.Run(runCtx, 1) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown(); kubeFactory.Shutdown() })
	started := time.Now()

	var ready *metav1.Condition
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready = meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		return ready.Status == metav1.ConditionUnknown, nil
	}); err != nil {
		t.Fatalf("a cluster without a Lease stayed Ready=%s: %v", ready.Status, err)
	}
	if ready.Reason != clusterv1alpha1.ClusterReasonStatusUnknown {
		t.Errorf("reason %s, want %s", ready.Reason, clusterv1alpha1.ClusterReasonStatusUnknown)
	}
	// Second precision on the condition's time.
	if after := ready.LastTransitionTime.Sub(started); after < startupGrace-time.Second {
		t.Errorf("Unknown %s after the hub started, before the startup grace %s", after, startupGrace)
	}
}
