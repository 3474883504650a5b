package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
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

// NewAPIRequestCounter registers flotilla_api_requests_total on reg: requests
// by the binary's own clients (one per controller), by method and code, so an
// operator can see which controller writes to the apiserver.
func NewAPIRequestCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "api_requests_total",
		Help:      "Requests to the apiserver by Flotilla client (controller), method and status code.",
	}, []string{"client", "method", "code"})
	reg.MustRegister(c)
	return c
}

// ClientConfig returns a copy of cfg for the client called name: its own rate
// limiter, as kube-controller-manager gives each controller, so one busy
// controller cannot starve another or the leader election; a user agent that
// names it in the apiserver's audit log; and, when requests is not nil, each
// request counted under client=name.
func ClientConfig(cfg *rest.Config, name string, requests *prometheus.CounterVec) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.RateLimiter = nil
	out.UserAgent = cfg.UserAgent + "/" + name
	if requests != nil {
		out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return countingRoundTripper{next: rt, name: name, requests: requests}
		})
	}
	return out
}

type countingRoundTripper struct {
	next     http.RoundTripper
	name     string
	requests *prometheus.CounterVec
}

func (c countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	code := "<error>"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	c.requests.WithLabelValues(c.name, req.Method, code).Inc()
	return resp, err
}
