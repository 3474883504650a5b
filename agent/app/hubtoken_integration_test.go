package app_test

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/agent/app"
	"github.com/flotilla-io/flotilla/pkg/agent/hubtoken"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// createAgentIdentity makes on the hub what the cluster-lifecycle
// controller makes for a cluster's agent (the same rules), so the agent
// runs as its real least-privilege identity.
func (f *fleet) createAgentIdentity(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns, sa := f.clusterNamespace, clusterlifecycle.AgentServiceAccount
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	rbac := f.hub.Kube.RbacV1()
	for _, create := range []func() error{
		func() error {
			_, err := f.hub.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa},
				Rules: clusterlifecycle.AgentNamespaceRules(f.clusterName)}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: clusterlifecycle.AgentClusterRoleName(f.clusterName)},
				Rules: clusterlifecycle.AgentClusterRules(f.clusterName)}, metav1.CreateOptions{})
			return err
		},
		func() error {
			name := clusterlifecycle.AgentClusterRoleName(f.clusterName)
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{})
			return err
		},
	} {
		mustCreate(t, create)
	}
}

// tokenKubeconfig writes a hub kubeconfig that authenticates with token.
func (f *fleet) tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg := rest.AnonymousClientConfig(f.hub.Config)
	cfg.BearerToken = token
	return f.hub.KubeconfigFor(t, cfg)
}

// runStoppableAgent runs the agent in-process and returns a stop function
// that waits for it (a restart is stop, then start again).
func runStoppableAgent(t *testing.T, opts *app.Options) (stop func()) {
	t.Helper()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := app.Run(ctx, opts); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// tokenMetric reads one sample from the agent's /metrics.
func tokenMetric(t *testing.T, addr, series string) (float64, bool) {
	t.Helper()
	_, body, err := testenv.HTTPGet(context.Background(), addr, "/metrics")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// No credential cliff, against real apiservers: the agent starts with a
// ServiceAccount token that expires in 45 s (minted with the hub apiserver's
// own signing key: TokenRequest grants no less than 10 minutes), renews it
// through TokenRequest several times, and keeps the hub Lease fresh across
// the first token's expiry; the apiserver then refuses the first token,
// and an agent restarted with only that expired token in its kubeconfig
// carries on with the one it persisted in the member Secret.
//
// Without the renewer the Lease stops the moment the apiserver refuses the
// first token (exp + go-jose's one-minute leeway), and the restart fails.
func TestAgentRenewsItsHubTokenAcrossExpiryAndRestart(t *testing.T) {
	// Waits out real token lifetimes: run beside the others.
	t.Parallel()
	f := newFleet(t)
	f.register(t, f.memberKubeSystem, true)
	f.createAgentIdentity(t)
	ctx := context.Background()

	const firstLifetime = 45 * time.Second
	first := f.hub.ServiceAccountToken(t, f.clusterNamespace, clusterlifecycle.AgentServiceAccount, firstLifetime)
	firstTok, err := hubtoken.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	firstClient := f.tokenClient(first)
	if _, err := firstClient.CoordinationV1().Leases(f.clusterNamespace).Get(ctx, f.clusterName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the hub apiserver does not accept the minted token: %v", err)
	}

	opts := f.fastOptions("node-a")
	opts.HubKubeconfig = f.tokenKubeconfig(t, first)
	opts.ClusterLeaseDuration = 4 * time.Second // renew every 1s
	renewInterval := time.Duration(float64(opts.ClusterLeaseDuration) * opts.ClusterLeaseRenewIntervalFraction)
	// Renewed tokens live 10 minutes (TokenRequest's minimum, as the first
	// is shorter); renewing at 5% renews every 30 s, so the test sees
	// several renewals, the first after ~2 s.
	opts.HubTokenRenewFraction = 0.05
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	stop := runStoppableAgent(t, opts)

	// Watch the Lease's renewTime for gaps from the first renewal until the
	// apiserver refuses the first token.
	stopWatch := f.watchLeaseGaps(t)
	rejectedAt := waitRejected(t, firstClient, f, firstTok)
	poll(t, 10*renewInterval, "a Lease renewal after the first token was refused", func() bool { return f.renewTime(t).After(rejectedAt) })
	gap, n := stopWatch()
	t.Logf("Lease renewed %d times across the first token's expiry; longest gap %s (renew interval %s)", n, gap, renewInterval)
	// The gap between two renewTimes is the interval plus one request; a
	// token the agent failed to replace would stop every renewal for good.
	// A few seconds of slack absorb a loaded CI machine; the hub would call
	// the cluster silent only after its 40s grace period.
	if gap > 3*renewInterval+2*time.Second {
		t.Errorf("the Lease went %s without a renewal across the first token's expiry (renew interval %s)", gap, renewInterval)
	}

	// Several renewals, and the token in use expires well after the first.
	if v, ok := tokenMetric(t, opts.MetricsBindAddress, `flotilla_agent_hub_token_renewals_total{result="success"}`); !ok || v < 3 {
		t.Errorf("flotilla_agent_hub_token_renewals_total{result=success} = %v (found %v), want at least 3", v, ok)
	}
	exp, ok := tokenMetric(t, opts.MetricsBindAddress, "flotilla_agent_hub_token_expiration_timestamp_seconds")
	if !ok || exp < float64(firstTok.Expiry.Add(5*time.Minute).Unix()) {
		t.Errorf("flotilla_agent_hub_token_expiration_timestamp_seconds = %v (found %v), want after %v", exp, ok, firstTok.Expiry.Add(5*time.Minute))
	}
	// The renewal is recorded on the Cluster.
	poll(t, 10*time.Second, "a HubTokenRenewed event", func() bool {
		evs, err := f.hub.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + hubtoken.ReasonRenewed})
		return err == nil && len(evs.Items) > 0 && evs.Items[0].InvolvedObject.Kind == "Cluster" && evs.Items[0].InvolvedObject.Name == f.clusterName
	})

	// The newest token is persisted in the member.
	secret, err := f.member.Kube.CoreV1().Secrets(f.agentNamespace).Get(ctx, opts.HubTokenSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := hubtoken.Parse(string(secret.Data[hubtoken.SecretKey]))
	if err != nil || !stored.Expiry.After(firstTok.Expiry.Add(5*time.Minute)) || !stored.SameIdentity(firstTok) {
		t.Fatalf("persisted token %v (%v): want the agent's identity, expiring well after the first", stored, err)
	}

	// Restart with the same kubeconfig, whose token the hub now refuses.
	stop()
	restartedAt := time.Now()
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	runStoppableAgent(t, opts)
	poll(t, 45*time.Second, "a Lease renewal by the restarted agent", func() bool { return f.renewTime(t).After(restartedAt.Add(time.Second)) })
	if exp, ok := tokenMetric(t, opts.MetricsBindAddress, "flotilla_agent_hub_token_expiration_timestamp_seconds"); !ok || exp < float64(stored.Expiry.Unix()) {
		t.Errorf("the restarted agent uses a token expiring at %v, want the persisted one's %v or later", exp, stored.Expiry.Unix())
	}
}

// An agent whose hub credential is not a token (a client certificate here,
// as most other tests use) runs as before: nothing is renewed or persisted.
func TestAgentLeavesACertificateCredentialAlone(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, f.memberKubeSystem, true)
	opts := f.fastOptions("node-a")
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	runStoppableAgent(t, opts)
	poll(t, 30*time.Second, "a Lease renewal", func() bool { return !f.renewTime(t).IsZero() })
	if v, ok := tokenMetric(t, opts.MetricsBindAddress, "flotilla_agent_hub_token_expiration_timestamp_seconds"); !ok || v != 0 {
		t.Errorf("flotilla_agent_hub_token_expiration_timestamp_seconds = %v (found %v), want 0", v, ok)
	}
	if _, err := f.member.Kube.CoreV1().Secrets(f.agentNamespace).Get(context.Background(), opts.HubTokenSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a hub token Secret was written for a certificate credential: %v", err)
	}
}

// watchLeaseGaps polls the cluster's hub Lease from its first renewal on
// and, when stopped, returns the longest time between two renewals (a
// renewal late at the moment counts too) and how many it saw.
func (f *fleet) watchLeaseGaps(t *testing.T) (stop func() (time.Duration, int)) {
	t.Helper()
	poll(t, 30*time.Second, "the agent's first Lease renewal", func() bool { return !f.renewTime(t).IsZero() })
	var (
		mu     sync.Mutex
		maxGap time.Duration
		renews int
	)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		last := f.renewTime(t)
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			l, err := f.hub.Kube.CoordinationV1().Leases(f.clusterNamespace).Get(context.Background(), f.clusterName, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				continue
			}
			cur := l.Spec.RenewTime.Time
			mu.Lock()
			if cur.After(last) {
				maxGap, renews = max(maxGap, cur.Sub(last)), renews+1
				last = cur
			} else if gap := time.Since(last); gap > maxGap {
				maxGap = gap
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop = func() (time.Duration, int) {
		once.Do(func() { close(quit); <-done })
		mu.Lock()
		defer mu.Unlock()
		return maxGap, renews
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitRejected waits until the hub apiserver refuses tok (it accepts a
// token up to a minute past exp, go-jose's default leeway, and caches
// authentications for a few seconds) and returns when.
func waitRejected(t *testing.T, client kubernetes.Interface, f *fleet, tok hubtoken.Token) time.Time {
	t.Helper()
	for deadline := tok.Expiry.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		_, err := client.CoordinationV1().Leases(f.clusterNamespace).Get(context.Background(), f.clusterName, metav1.GetOptions{})
		if apierrors.IsUnauthorized(err) {
			return time.Now()
		}
	}
	t.Fatalf("the hub apiserver still accepts the token %s after its expiry", time.Since(tok.Expiry))
	return time.Time{}
}

// tokenClient authenticates to the hub with token only.
func (f *fleet) tokenClient(token string) kubernetes.Interface {
	c := rest.AnonymousClientConfig(f.hub.Config)
	c.BearerToken = token
	return kubernetes.NewForConfigOrDie(c)
}

// Opt-in, about 25 minutes (FLOTILLA_HUBTOKEN_LONG=1 go test -timeout 40m
// -run TestAgentRenewsTokenRequestTokensLong ./agent/app/): the same with
// tokens only TokenRequest issues, at its 10-minute minimum, renewed at
// half their lifetime, across two full lifetimes. The default run cannot
// afford this: TokenRequest refuses lifetimes under 10 minutes, so crossing
// several real expiries takes tens of minutes (the short test mints its
// first token itself instead).
func TestAgentRenewsTokenRequestTokensLong(t *testing.T) {
	t.Parallel()
	if os.Getenv("FLOTILLA_HUBTOKEN_LONG") == "" {
		t.Skip("set FLOTILLA_HUBTOKEN_LONG=1 (and -timeout 40m) to run the agent across several 10-minute TokenRequest lifetimes")
	}
	f := newFleet(t)
	f.register(t, f.memberKubeSystem, true)
	f.createAgentIdentity(t)
	ctx := context.Background()
	tr, err := f.hub.Kube.CoreV1().ServiceAccounts(f.clusterNamespace).CreateToken(ctx, clusterlifecycle.AgentServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	firstTok, err := hubtoken.Parse(tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	opts := f.fastOptions("node-a")
	opts.HubKubeconfig = f.tokenKubeconfig(t, tr.Status.Token)
	opts.ClusterLeaseDuration = 4 * time.Second
	renewInterval := time.Duration(float64(opts.ClusterLeaseDuration) * opts.ClusterLeaseRenewIntervalFraction)
	opts.HubTokenRenewFraction = 0.5
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	runStoppableAgent(t, opts)
	stopWatch := f.watchLeaseGaps(t)
	rejectedAt := waitRejected(t, f.tokenClient(tr.Status.Token), f, firstTok)
	// The second token (issued at 5m) expires at 15m: run past it too.
	end := firstTok.Expiry.Add(7 * time.Minute)
	poll(t, time.Until(end)+time.Minute, "the agent to run past the second token's expiry", func() bool {
		return time.Now().After(end) && f.renewTime(t).After(rejectedAt)
	})
	gap, n := stopWatch()
	t.Logf("Lease renewed %d times across two token lifetimes; longest gap %s", n, gap)
	if gap > 3*renewInterval+2*time.Second {
		t.Errorf("the Lease went %s without a renewal (renew interval %s)", gap, renewInterval)
	}
	if v, ok := tokenMetric(t, opts.MetricsBindAddress, `flotilla_agent_hub_token_renewals_total{result="success"}`); !ok || v < 3 {
		t.Errorf("flotilla_agent_hub_token_renewals_total{result=success} = %v, want at least 3", v)
	}
}

// The hub is unreachable when the renewal falls due: the agent retries with
// backoff (denser as the expiry nears), warns on the Cluster, and renews as
// soon as the hub is back, before the token expires; the Lease then carries
// on past the first token's expiry.
func TestAgentRenewsItsHubTokenAfterAHubOutage(t *testing.T) {
	// Waits out real token lifetimes: run beside the others.
	t.Parallel()
	f := newFleet(t)
	f.register(t, f.memberKubeSystem, true)
	f.createAgentIdentity(t)
	ctx := context.Background()
	const lifetime = 60 * time.Second
	first := f.hub.ServiceAccountToken(t, f.clusterNamespace, clusterlifecycle.AgentServiceAccount, lifetime)
	firstTok, err := hubtoken.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startTCPProxy(t, f.hub.Config.Host)
	cfg := rest.AnonymousClientConfig(f.hub.Config)
	cfg.Host, cfg.BearerToken = proxy.url, first
	opts := f.fastOptions("node-a")
	opts.HubKubeconfig = f.hub.KubeconfigFor(t, cfg)
	opts.HubTokenRenewFraction = 0.4 // due 24 s after issue, warning at 42 s, expiry at 60 s
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	runStoppableAgent(t, opts)
	poll(t, 30*time.Second, "the agent's first Lease renewal", func() bool { return !f.renewTime(t).IsZero() })

	proxy.cut()
	renewAt := hubtoken.RenewAt(firstTok, opts.HubTokenRenewFraction, time.Time{})
	warnAt := renewAt.Add(firstTok.Expiry.Sub(renewAt) / 2)
	failures := func() float64 {
		v, _ := tokenMetric(t, opts.MetricsBindAddress, `flotilla_agent_hub_token_renewals_total{result="error"}`)
		return v
	}
	poll(t, time.Until(warnAt)+5*time.Second, "the warning point", func() bool { return time.Now().After(warnAt.Add(100 * time.Millisecond)) })
	atWarn := failures()
	if atWarn < 3 {
		t.Fatalf("%v failed renewals while the hub was unreachable, want several retries", atWarn)
	}
	// One more failure past the warning point, which the warning needs.
	poll(t, time.Until(firstTok.Expiry)/2, "a failed renewal past the warning point", func() bool { return failures() > atWarn })
	if exp, _ := tokenMetric(t, opts.MetricsBindAddress, "flotilla_agent_hub_token_expiration_timestamp_seconds"); exp != float64(firstTok.Expiry.Unix()) {
		t.Fatalf("the agent reports a token expiring at %v while the hub is unreachable, want the first one's %v", exp, firstTok.Expiry.Unix())
	}
	proxy.restore()
	poll(t, time.Until(firstTok.Expiry), "a renewal before the first token expires", func() bool {
		v, _ := tokenMetric(t, opts.MetricsBindAddress, `flotilla_agent_hub_token_renewals_total{result="success"}`)
		return v >= 1
	})
	// The warning was recorded (the event recorder retries while the hub is
	// unreachable), and so was the renewal.
	for _, reason := range []string{hubtoken.ReasonExpiringSoon, hubtoken.ReasonRenewed} {
		poll(t, 30*time.Second, "a "+reason+" event", func() bool {
			evs, err := f.hub.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
			return err == nil && len(evs.Items) > 0
		})
	}
	rejectedAt := waitRejected(t, f.tokenClient(first), f, firstTok)
	poll(t, 10*time.Second, "a Lease renewal after the first token was refused", func() bool { return f.renewTime(t).After(rejectedAt) })
}
