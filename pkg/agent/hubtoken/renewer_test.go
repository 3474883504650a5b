package hubtoken

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
)

// Every request made from the rewired config carries the renewer's current
// token, and the kubeconfig's own token no longer (client-go's bearer
// round tripper would otherwise win over the token source).
func TestNewServesTheCurrentTokenToHubClients(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	now := time.Now()
	first := saToken(t, "u1", now, now.Add(time.Hour))
	cfg := &rest.Config{Host: srv.URL, BearerToken: first.Raw}
	r, err := New(context.Background(), cfg, Options{Cluster: "member1", RenewFraction: DefaultRenewFraction})
	if err != nil || r == nil {
		t.Fatalf("New = %v, %v", r, err)
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile != "" {
		t.Fatalf("the config still carries its own token")
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		t.Helper()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	if got := get(); got != "Bearer "+first.Raw {
		t.Fatalf("Authorization %q, want the kubeconfig's token", got)
	}
	second := saToken(t, "u1", now.Add(time.Minute), now.Add(2*time.Hour))
	r.set(second)
	if got := get(); got != "Bearer "+second.Raw {
		t.Fatalf("after a renewal, Authorization %q, want the new token", got)
	}
}

// At start the persisted token wins when it is the same identity and
// expires later; credentials the renewer cannot read are left alone.
func TestNewPrefersTheLaterPersistedToken(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	kubeconfig := saToken(t, "u1", now.Add(-50*time.Minute), now.Add(-time.Minute)) // expired
	persisted := saToken(t, "u1", now.Add(-10*time.Minute), now.Add(50*time.Minute))
	store := &FileStore{Path: filepath.Join(t.TempDir(), "token")}
	if err := store.Save(ctx, persisted); err != nil {
		t.Fatal(err)
	}
	r, err := New(ctx, &rest.Config{Host: "https://hub", BearerToken: kubeconfig.Raw}, Options{RenewFraction: 0.8, Store: store})
	if err != nil || r == nil || r.Current().Raw != persisted.Raw {
		t.Fatalf("New with a later persisted token uses %v (%v), want the persisted one", r.Current(), err)
	}
	for name, cfg := range map[string]*rest.Config{
		"client certificate": {Host: "https://hub", TLSClientConfig: rest.TLSClientConfig{CertData: []byte("c"), KeyData: []byte("k")}},
		"opaque token":       {Host: "https://hub", BearerToken: "abcdef.0123456789abcdef"},
	} {
		before := *cfg
		r, err := New(ctx, cfg, Options{RenewFraction: 0.8, Store: store})
		if err != nil || r != nil || cfg.BearerToken != before.BearerToken || cfg.WrapTransport != nil {
			t.Errorf("%s: New = %v, %v and the config changed: want it left alone", name, r, err)
		}
	}
}

// The loop against a fake hub and clock: it renews at 80% of the lifetime,
// retries a hub that fails with the backoff of RetryDelay, warns once when
// the token gets close to expiry, and on success switches every client to
// the new token, persists it, and records it.
func TestRenewerRetriesWarnsAndRenews(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	first := saToken(t, "u1", t0, t0.Add(100*time.Minute))
	hubUpAt := t0.Add(92 * time.Minute) // after the warning threshold (90%)

	hub := fake.NewClientset()
	var (
		mu       sync.Mutex
		attempts []time.Time
		issued   Token
	)
	hub.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "token" {
			return false, nil, nil
		}
		ca := action.(k8stesting.CreateActionImpl)
		tr := ca.GetObject().(*authenticationv1.TokenRequest)
		mu.Lock()
		defer mu.Unlock()
		now := clk.Now()
		attempts = append(attempts, now)
		if ca.GetNamespace() != first.Namespace || ca.Name != first.ServiceAccount {
			t.Errorf("token requested for %s/%s, want the agent's own ServiceAccount", ca.GetNamespace(), ca.Name)
		}
		if got := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second; got != 100*time.Minute {
			t.Errorf("requested lifetime %s, want the replaced token's 100m", got)
		}
		if now.Before(hubUpAt) {
			return true, nil, apierrors.NewServiceUnavailable("hub apiserver restarting")
		}
		issued = saToken(t, "u1", now, now.Add(100*time.Minute))
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: issued.Raw}}, nil
	})
	store := &FileStore{Path: filepath.Join(t.TempDir(), "token")}
	r, err := New(ctx, &rest.Config{Host: "https://hub", BearerToken: first.Raw}, Options{
		Cluster: "member1", RenewFraction: DefaultRenewFraction, Store: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := agentmetrics.New(reg)
	recorder := record.NewFakeRecorder(100)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, hub, nil, recorder, m) }()

	nAttempts := func() int { mu.Lock(); defer mu.Unlock(); return len(attempts) }
	// waitIdle waits until the loop sleeps again after want attempts.
	waitIdle := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !(clk.HasWaiters() && nAttempts() == want) {
			if time.Now().After(deadline) {
				t.Fatalf("the renewer did not settle after %d attempts (has %d, waiting %v)", want, nAttempts(), clk.HasWaiters())
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitIdle(0)
	if got := gauge(t, m.HubTokenExpiration); got != float64(first.Expiry.Unix()) {
		t.Fatalf("expiration gauge %v, want the first token's %v", got, first.Expiry.Unix())
	}
	clk.Step(80*time.Minute - time.Second)
	waitIdle(0) // not yet due
	clk.Step(time.Second)
	waitIdle(1)
	for n := 1; clk.Now().Before(hubUpAt); n++ {
		clk.Step(RetryDelay(n, first.Expiry.Sub(clk.Now())))
		waitIdle(n + 1)
	}
	failures := nAttempts() - 1
	if failures < 8 {
		t.Fatalf("only %d retries between the renewal point and 92%% of the lifetime", failures)
	}
	if r.Current().Raw != issued.Raw {
		t.Fatalf("the renewer uses %v, want the issued token %v", r.Current(), issued)
	}
	if got := gauge(t, m.HubTokenExpiration); got != float64(issued.Expiry.Unix()) {
		t.Errorf("expiration gauge %v, want the new token's %v", got, issued.Expiry.Unix())
	}
	if got := counter(t, m.HubTokenRenewals.WithLabelValues("error")); got != float64(failures) {
		t.Errorf("renewals{error} = %v, want %d", got, failures)
	}
	if got := counter(t, m.HubTokenRenewals.WithLabelValues("success")); got != 1 {
		t.Errorf("renewals{success} = %v, want 1", got)
	}
	if got := counter(t, m.HubRequestErrors.WithLabelValues(operationRenew, "ServerError")); got != float64(failures) {
		t.Errorf("hub_request_errors{renew-hub-token,ServerError} = %v, want %d", got, failures)
	}
	if raw, _ := store.Load(ctx); raw != issued.Raw {
		t.Errorf("the new token was not persisted")
	}
	var warnings, renewed int
	for len(recorder.Events) > 0 {
		e := <-recorder.Events
		switch {
		case strings.HasPrefix(e, "Warning "+ReasonExpiringSoon):
			warnings++
		case strings.HasPrefix(e, "Normal "+ReasonRenewed):
			renewed++
		default:
			t.Errorf("unexpected event %q", e)
		}
	}
	if warnings != 1 || renewed != 1 {
		t.Errorf("events: %d %s (want 1, once per token), %d %s (want 1)", warnings, ReasonExpiringSoon, renewed, ReasonRenewed)
	}
	cancel()
	<-done
}

// A sibling agent process (or this one before a restart) persisted a later
// token of the same identity: at the renewal point the renewer takes it
// instead of asking the hub.
func TestRenewerAdoptsASiblingsLaterToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	first := saToken(t, "u1", t0, t0.Add(10*time.Minute))
	hub := fake.NewClientset()
	hub.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		t.Errorf("the hub was asked for a token although a later one was stored")
		return true, nil, apierrors.NewServiceUnavailable("no")
	})
	store := &FileStore{Path: filepath.Join(t.TempDir(), "token")}
	r, err := New(ctx, &rest.Config{Host: "https://hub", BearerToken: first.Raw}, Options{RenewFraction: 0.8, Store: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, hub, nil, nil, nil) }()
	sibling := saToken(t, "u1", t0.Add(time.Minute), t0.Add(11*time.Minute))
	if err := store.Save(ctx, sibling); err != nil {
		t.Fatal(err)
	}
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(8 * time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for r.Current().Raw != sibling.Raw {
		if time.Now().After(deadline) {
			t.Fatalf("the renewer kept %v, want the sibling's later token", r.Current())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
