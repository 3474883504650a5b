package clusterstatus

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// Against a real kube-apiserver: healthy with valid credentials, and
// ClusterNotReachable (not a crash, not NotReady) with an expired token.
func TestProbeRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	probe := func(cfg *rest.Config) (metav1.ConditionStatus, string) {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		obs := ProbeAPIServer(t.Context(), kube.Discovery().RESTClient())
		return obs.Status, obs.Reason
	}
	if status, reason := probe(env.Config); status != metav1.ConditionTrue || reason != clusterv1alpha1.ClusterReasonReady {
		t.Fatalf("admin credentials: got %s/%s, want True/ClusterReady", status, reason)
	}

	expired := rest.AnonymousClientConfig(env.Config)
	expired.BearerToken = "expired-or-revoked-token"
	if status, reason := probe(expired); status != metav1.ConditionFalse || reason != clusterv1alpha1.ClusterReasonNotReachable {
		t.Fatalf("bad token: got %s/%s, want False/ClusterNotReachable", status, reason)
	}

	t.Run("discovery cache", func(t *testing.T) { testDiscoveryCacheRealAPIServer(t, env) })
}
