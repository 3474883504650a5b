package clusterstatus

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

func restClientFor(t *testing.T, url string) rest.Interface {
	t.Helper()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: url})
	if err != nil {
		t.Fatal(err)
	}
	return kube.Discovery().RESTClient()
}

func TestProbeAPIServer(t *testing.T) {
	cases := []struct {
		name        string
		readyz      int // 0: /readyz not served (404)
		healthz     int
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{"ready", 200, 0, metav1.ConditionTrue, clusterv1alpha1.ClusterReasonReady, "healthy"},
		{"not ready", 500, 0, metav1.ConditionFalse, clusterv1alpha1.ClusterReasonNotReady, "[-]etcd failed"},
		{"old apiserver without readyz, healthy", 0, 200, metav1.ConditionTrue, clusterv1alpha1.ClusterReasonReady, "healthy"},
		{"old apiserver without readyz, unhealthy", 0, 503, metav1.ConditionFalse, clusterv1alpha1.ClusterReasonNotReady, "503"},
		{"expired credentials", 401, 0, metav1.ConditionFalse, clusterv1alpha1.ClusterReasonNotReachable, "credentials"},
		{"forbidden", 403, 0, metav1.ConditionFalse, clusterv1alpha1.ClusterReasonNotReachable, "credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				code := tc.healthz
				if r.URL.Path == "/readyz" {
					code = tc.readyz
				}
				if code == 0 {
					code = http.StatusNotFound
				}
				w.WriteHeader(code)
				if code != http.StatusOK {
					_, _ = w.Write([]byte("[-]etcd failed: reason withheld\n"))
				}
			}))
			defer srv.Close()
			got := ProbeAPIServer(context.Background(), restClientFor(t, srv.URL))
			if got.Status != tc.wantStatus || got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantMessage) {
				t.Fatalf("got %+v, want %s/%s with message containing %q", got, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func TestProbeAPIServerUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	got := ProbeAPIServer(context.Background(), restClientFor(t, url))
	if got.Status != metav1.ConditionFalse || got.Reason != clusterv1alpha1.ClusterReasonNotReachable || !strings.Contains(got.Message, "unreachable") {
		t.Fatalf("got %+v, want False/ClusterNotReachable", got)
	}
}

func TestProbeAPIServerBoundsMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(strings.Repeat("x", 10000)))
	}))
	defer srv.Close()
	got := ProbeAPIServer(context.Background(), restClientFor(t, srv.URL))
	if len(got.Message) > maxMessage {
		t.Fatalf("message is %d bytes, want at most %d", len(got.Message), maxMessage)
	}
}
