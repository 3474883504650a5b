package hubtoken

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// The hub refuses the token in use (its ServiceAccount was re-created): the
// renewer re-reads the kubeconfig at once and takes the token an admin put
// there, although it is for another ServiceAccount UID; a token the hub
// refused is never taken again, and one it did not refuse is not replaced
// by an unchanged kubeconfig.
func TestRenewerReplacesARefusedTokenWithTheKubeconfigs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	old := saToken(t, "old-uid", now, now.Add(time.Hour))
	renewed := saToken(t, "old-uid", now.Add(time.Second), now.Add(2*time.Hour))
	fresh := saToken(t, "new-uid", now.Add(2*time.Second), now.Add(time.Hour))

	var mu sync.Mutex
	refuse := map[string]bool{old.Raw: true}
	kubeconfigToken := old.Raw
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if refuse[r.Header.Get("Authorization")[len("Bearer "):]] {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: old.Raw}
	r, err := New(ctx, cfg, Options{RenewFraction: DefaultRenewFraction, Reload: func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		return kubeconfigToken, nil
	}})
	if err != nil || r == nil {
		t.Fatalf("New = %v, %v", r, err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, fake.NewClientset(), nil, nil, nil) }()
	get := func() int {
		t.Helper()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// Same identity, renewed (not refused): the unchanged kubeconfig keeps
	// nothing from happening.
	r.set(renewed)
	if code := get(); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	// The ServiceAccount is re-created: both of its tokens are refused.
	mu.Lock()
	refuse[renewed.Raw] = true
	mu.Unlock()
	if code := get(); code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", code)
	}
	time.Sleep(100 * time.Millisecond)
	if cur := r.Current(); cur.Raw != renewed.Raw {
		t.Fatalf("with nothing better, the renewer switched to %v (the old token, refused before)", cur)
	}
	// The admin hands out a token of the new ServiceAccount.
	mu.Lock()
	kubeconfigToken = fresh.Raw
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for r.Current().Raw != fresh.Raw {
		if time.Now().After(deadline) {
			t.Fatalf("the renewer kept %v, want the kubeconfig's new token", r.Current())
		}
		get() // the clients keep retrying; each 401 wakes the renewer
		time.Sleep(50 * time.Millisecond)
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("status %d with the new token", code)
	}
	cancel()
	<-done
}
