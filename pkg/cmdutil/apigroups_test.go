package cmdutil

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// APIGroupsServed tells a group the apiserver does not serve from one it
// cannot ask about, and ends with its context when the apiserver hangs.
func TestAPIGroupsServed(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis/served.example.com/v1", "/api/v1":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"served.example.com/v1","resources":[]}`))
		case "/apis/hangs.example.com/v1":
			<-hang
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(hang) // before Close, which waits for the hanging handler
	client := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})
	ctx := context.Background()
	if err := APIGroupsServed(client, "served.example.com/v1", "v1")(ctx); err != nil {
		t.Fatalf("served: %v", err)
	}
	if err := APIGroupsServed(client, "served.example.com/v1", "missing.example.com/v1")(ctx); err == nil || !strings.Contains(err.Error(), "not served") || !strings.Contains(err.Error(), "missing.example.com/v1") {
		t.Fatalf("missing: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := APIGroupsServed(client, "hangs.example.com/v1")(tctx)
	if err == nil || strings.Contains(err.Error(), "not served") {
		t.Fatalf("hanging apiserver: %v, want a discovery error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("hanging apiserver: the check took %v, past its context", d)
	}
}
