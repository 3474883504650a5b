// Package clusterstatus is the agent's view of its member cluster's health:
// the apiserver probe behind the Ready condition.
package clusterstatus

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/health"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// maxMessage bounds the apiserver body quoted in a condition message.
const maxMessage = 256

// ProbeAPIServer asks the member apiserver for /readyz, falling back to
// /healthz when /readyz is not served (404), and classifies the answer:
//
//	200                      → True,  ClusterReady
//	401, 403                 → False, ClusterNotReachable (our credentials are refused)
//	any other status         → False, ClusterNotReady
//	no answer (transport)    → False, ClusterNotReachable
func ProbeAPIServer(ctx context.Context, client rest.Interface) health.Observation {
	code, body, err := health.GetAPIServerHealth(ctx, client)
	switch {
	case err != nil:
		return health.Observation{Status: metav1.ConditionFalse, Reason: clusterv1alpha1.ClusterReasonNotReachable,
			Message: truncate("cluster apiserver unreachable: " + err.Error())}
	case code == http.StatusOK:
		return health.Observation{Status: metav1.ConditionTrue, Reason: clusterv1alpha1.ClusterReasonReady,
			Message: "cluster is healthy and ready to accept workloads"}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return health.Observation{Status: metav1.ConditionFalse, Reason: clusterv1alpha1.ClusterReasonNotReachable,
			Message: truncate(fmt.Sprintf("cluster apiserver refused the agent's credentials (%d %s)", code, http.StatusText(code)))}
	default:
		return health.Observation{Status: metav1.ConditionFalse, Reason: clusterv1alpha1.ClusterReasonNotReady,
			Message: truncate(fmt.Sprintf("cluster apiserver is not ready (%d %s): %s", code, http.StatusText(code), strings.TrimSpace(body)))}
	}
}

// truncate bounds a message to maxMessage bytes, cut on a character.
func truncate(s string) string {
	return statuslimits.Truncate(s, maxMessage)
}
