package framework

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// SimulateAgent does what a real agent does for the hub until ctx ends:
// renews the cluster's Lease every interval once the hub has made it, and
// reports Ready True whenever the Cluster does not say so. onRenew, if set,
// is told each renewal time.
func SimulateAgent(ctx context.Context, kube kubernetes.Interface, flotilla flotillaclient.Interface, name string,
	interval time.Duration, onRenew func(time.Time)) {
	leases := kube.CoordinationV1().Leases("flotilla-es-" + name)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return
		}
		now := time.Now()
		l.Spec.RenewTime = &metav1.MicroTime{Time: now}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return
		}
		if onRenew != nil {
			onRenew(now)
		}
		c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil || meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			return
		}
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
			Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady, Message: "simulated"})
		_, _ = flotilla.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
	}, interval)
}
