// Package clusterstatus is the agent's view of its member cluster's health:
// the apiserver probe behind the Ready condition.
package clusterstatus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/health"
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
	code, body, err := get(ctx, client, "/readyz")
	if err == nil && code == http.StatusNotFound {
		code, body, err = get(ctx, client, "/healthz")
	}
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

// get returns the status code and body of a GET, or a transport error. An
// HTTP error status is not an error here: it is the answer we classify.
func get(ctx context.Context, client rest.Interface, path string) (int, string, error) {
	var code int
	body, err := client.Get().AbsPath(path).Do(ctx).StatusCode(&code).Raw()
	if err != nil && code == 0 {
		return 0, "", err
	}
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) && len(body) == 0 {
			body = []byte(status.Status().Message)
		}
	}
	return code, string(body), nil
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage] + "…"
}
