package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// restRequests counts the binary's requests to every apiserver it talks to,
// as Kubernetes components' rest_client_requests_total does: how many writes
// a hub or agent really makes is a question operators ask.
var restRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "rest_client_requests_total",
	Help: "Requests to apiservers by status code, method and host.",
}, []string{"code", "method", "host"})

type resultAdapter struct{}

func (resultAdapter) Increment(_ context.Context, code, method, host string) {
	restRequests.WithLabelValues(code, method, host).Inc()
}

var registerOnce sync.Once

// RegisterRESTClientMetrics hooks client-go's request results into reg. The
// client-go hook is process-wide, so only the first registry gets it.
func RegisterRESTClientMetrics(reg prometheus.Registerer) {
	registerOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: resultAdapter{}})
		reg.MustRegister(restRequests)
	})
}
