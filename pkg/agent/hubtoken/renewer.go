package hubtoken

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// Event reasons on the Cluster.
const (
	ReasonRenewed      = "HubTokenRenewed"
	ReasonExpiringSoon = "HubTokenExpiringSoon"
	requestTimeout     = 30 * time.Second
	operationRenew     = "renew-hub-token"
	operationPersist   = "persist-hub-token"
	resultSuccess      = "success"
	resultError        = "error"
)

// Options configure a Renewer.
type Options struct {
	// Cluster names the Cluster the events are about.
	Cluster string
	// RenewFraction of a token's lifetime after which it is renewed.
	RenewFraction float64
	// Lifetime to request; 0 requests the lifetime of the token replaced.
	Lifetime time.Duration
	// Store persists the newest token; nil persists nothing.
	Store Store
	// Reload re-reads the token the hub kubeconfig holds now (the file, or
	// the token file it names), so a token an admin hands out there is
	// adopted without a restart; nil re-reads only the kubeconfig's token
	// file, if it names one.
	Reload func() (string, error)
	// Clock; nil is the real one.
	Clock clock.WithTicker
}

// recheckInterval spaces the re-reads a refused token triggers: every hub
// client retries on its own, and each refusal would otherwise re-read.
const recheckInterval = 2 * time.Second

// Renewer holds the agent's hub token and renews it. It is the oauth2
// TokenSource of every hub client (see New).
type Renewer struct {
	opts Options
	// reload reads the kubeconfig's token now; nil if it cannot be
	// re-read (an inline token and no Options.Reload).
	reload func() (string, error)
	// kubeconfigRaw is the kubeconfig's token when last read: a different
	// one is a credential an admin just handed out.
	kubeconfigRaw string
	// wake is signalled when the hub refuses a token (401).
	wake chan struct{}

	mu       sync.RWMutex
	current  Token
	previous Token     // the token current replaced, a candidate again if current is refused
	seen     time.Time // when current was adopted (its issue time if iat is missing)
	rejected map[string]bool
}

// New reads the token of the hub credential in cfg and, if it is one this
// package renews, returns a Renewer that already serves the better of that
// token and the persisted one (Prefer), and rewires cfg so that every client
// made from it afterwards takes its bearer token from the Renewer. It
// returns nil (and cfg unchanged) for any other credential, saying why once
// in the log.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Renewer, error) {
	logger := klog.FromContext(ctx)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RenewFraction <= 0 || opts.RenewFraction >= 1 {
		return nil, fmt.Errorf("hub token renew fraction %v is not in (0, 1)", opts.RenewFraction)
	}
	raw := cfg.BearerToken
	if cfg.BearerTokenFile != "" {
		// client-go prefers the file over an inline token too.
		data, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("hub kubeconfig token file: %w", err)
		}
		raw = string(data)
	}
	if raw == "" || cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		logger.Info("The hub credential is not a bearer token; the agent does not renew it (it must be rotated outside Flotilla)")
		return nil, nil
	}
	tok, err := Parse(raw)
	if err != nil {
		logger.Info("The hub token is not one the agent can renew; it must be rotated outside Flotilla", "reason", err.Error())
		return nil, nil
	}
	r := &Renewer{opts: opts, reload: opts.Reload, kubeconfigRaw: tok.Raw, wake: make(chan struct{}, 1), rejected: map[string]bool{}}
	if r.reload == nil && cfg.BearerTokenFile != "" {
		file := cfg.BearerTokenFile
		r.reload = func() (string, error) {
			data, err := os.ReadFile(file)
			return string(data), err
		}
	}
	r.set(tok)
	if opts.Store != nil {
		r.adoptStored(ctx)
	}
	logger.Info("Renewing the hub token before it expires", "serviceAccount", tok.Namespace+"/"+tok.ServiceAccount,
		"expires", r.Current().Expiry, "renewAt", RenewAt(r.Current(), opts.RenewFraction, r.seenAt()), "store", storeName(opts.Store))

	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	// Inside the token source's transport (which sets the header): the
	// hub's 401s, and the token they refused.
	cfg.Wrap(r.watchRefusals)
	cfg.Wrap(transport.TokenSourceWrapTransport(r))
	return r, nil
}

// watchRefusals wraps the hub transport: a 401 Unauthorized answer marks the
// token the request carried as refused and wakes Run, which looks for a
// replacement (a ServiceAccount re-created by the hub has a new UID, and
// the apiserver refuses every token of the old one).
func (r *Renewer) watchRefusals(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusUnauthorized {
			if raw, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
				r.refused(raw)
			}
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// refused records that the hub refused raw and wakes Run.
func (r *Renewer) refused(raw string) {
	r.mu.Lock()
	if len(r.rejected) >= 16 {
		clear(r.rejected) // bounded; a token refused again is recorded again
	}
	r.rejected[raw] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Renewer) isRejected(raw string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rejected[raw]
}

func storeName(s Store) string {
	if s == nil {
		return "none"
	}
	return s.String()
}

// Token implements oauth2.TokenSource for the hub clients. No Expiry is set:
// the hub's apiserver, not the client, decides whether a token still works.
func (r *Renewer) Token() (*oauth2.Token, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return &oauth2.Token{AccessToken: r.current.Raw, TokenType: "Bearer"}, nil
}

// Current is the token in use.
func (r *Renewer) Current() Token {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.current
}

func (r *Renewer) seenAt() time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.seen
}

func (r *Renewer) set(t Token) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.Raw != r.current.Raw {
		r.previous = r.current
	}
	r.current, r.seen = t, r.opts.Clock.Now()
}

// adopt switches to candidate if Prefer picks it, and reports whether it did.
func (r *Renewer) adopt(candidate Token) bool {
	cur := r.Current()
	if Prefer(cur, candidate) == cur {
		return false
	}
	r.set(candidate)
	return true
}

// adoptStored and adoptFile pick up a better token someone else wrote: the
// store (this process before a restart, or a sibling agent process of the
// same identity) and the kubeconfig's token file (an admin's rotation).
func (r *Renewer) adoptStored(ctx context.Context) bool {
	// A member apiserver that does not answer must not hold up the agent's
	// start: without the stored token it still has the kubeconfig's.
	loadCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	raw, err := r.opts.Store.Load(loadCtx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the persisted hub token", "store", r.opts.Store.String())
		return false
	}
	if raw == "" {
		return false
	}
	t, err := Parse(raw)
	if err != nil {
		klog.FromContext(ctx).Info("Ignoring the persisted hub token", "store", r.opts.Store.String(), "reason", err.Error())
		return false
	}
	return r.adopt(t)
}

// adoptKubeconfig re-reads the kubeconfig's token and, if an admin put a
// different one there since the last read, adopts it when it is for
// another ServiceAccount object (the hub re-created the agent's: the
// admin's new credential is the one that works) or expires later, and has
// not expired.
func (r *Renewer) adoptKubeconfig(ctx context.Context) bool {
	if r.reload == nil {
		return false
	}
	raw, err := r.reload()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Re-reading the hub kubeconfig's token")
		return false
	}
	raw = strings.TrimSpace(raw)
	if raw == r.kubeconfigRaw {
		return false
	}
	r.kubeconfigRaw = raw
	t, err := Parse(raw)
	if err != nil {
		klog.FromContext(ctx).Info("Ignoring the hub kubeconfig's new credential", "reason", err.Error())
		return false
	}
	return r.replaceWith(t)
}

// replaceWith switches to t if it is usable (not expired, not refused, not
// the current token) and better: another identity, or the same one
// expiring later.
func (r *Renewer) replaceWith(t Token) bool {
	cur := r.Current()
	if t.IsZero() || t.Raw == cur.Raw || r.isRejected(t.Raw) || !t.Expiry.After(r.opts.Clock.Now()) {
		return false
	}
	if t.SameIdentity(cur) && !t.Expiry.After(cur.Expiry) {
		return false
	}
	r.set(t)
	return true
}

// recover runs when the hub refused a token: if it refused the current one,
// the first usable token of the kubeconfig (re-read even if unchanged),
// the store, and the one used before replaces it.
func (r *Renewer) recover(ctx context.Context) bool {
	if r.adoptKubeconfig(ctx) {
		return true
	}
	cur := r.Current()
	if !r.isRejected(cur.Raw) {
		return false // a refusal of a token already replaced
	}
	var candidates []Token
	if r.reload != nil {
		if raw, err := r.reload(); err == nil {
			if t, err := Parse(raw); err == nil {
				candidates = append(candidates, t)
			}
		}
	}
	if r.opts.Store != nil {
		loadCtx, cancel := context.WithTimeout(ctx, requestTimeout)
		raw, err := r.opts.Store.Load(loadCtx)
		cancel()
		if err == nil && raw != "" {
			if t, err := Parse(raw); err == nil {
				candidates = append(candidates, t)
			}
		}
	}
	r.mu.RLock()
	candidates = append(candidates, r.previous)
	r.mu.RUnlock()
	for _, t := range candidates {
		if r.replaceWith(t) {
			return true
		}
	}
	return false
}

// Run renews the token until ctx is done. Every agent process runs it,
// leader or not, so a standby holds a valid token when it takes over.
// Events are recorded on the Cluster through recorder (the agent's hub
// recorder); flotilla reads the Cluster's UID for them.
func (r *Renewer) Run(ctx context.Context, hub kubernetes.Interface, flotilla flotillaclient.Interface, recorder record.EventRecorder, m *agentmetrics.Metrics) {
	logger := klog.FromContext(ctx).WithName("hub-token")
	ctx = klog.NewContext(ctx, logger)
	t := &trackers{renew: hubconn.NewTracker(operationRenew, m), persist: hubconn.NewTracker(operationPersist, m)}
	events := &eventer{cluster: r.opts.Cluster, flotilla: flotilla, recorder: recorder}
	var warned string // the token the ExpiringSoon warning was given for
	failures := 0
	var lastRecheck time.Time
	for {
		cur := r.Current()
		if m != nil {
			m.HubTokenExpiration.Set(float64(cur.Expiry.Unix()))
		}
		now := r.opts.Clock.Now()
		wait := RenewAt(cur, r.opts.RenewFraction, r.seenAt()).Sub(now)
		if failures > 0 {
			wait = RetryDelay(failures, cur.Expiry.Sub(now))
		}
		// A refusal wakes the loop, at most once per recheckInterval; one
		// that comes sooner is handled when the interval is over.
		wake, deferred := r.wake, false
		if next := lastRecheck.Add(recheckInterval); now.Before(next) {
			wake = nil
			if next.Sub(now) < wait {
				wait, deferred = next.Sub(now), true
			}
		}
		timer := r.opts.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-wake:
			timer.Stop()
			lastRecheck = r.opts.Clock.Now()
			if r.recover(ctx) {
				logger.Info("The hub refused the agent's token; using another one it has", "serviceAccount", r.Current().Namespace+"/"+r.Current().ServiceAccount,
					"uid", r.Current().UID, "expires", r.Current().Expiry)
				failures = 0
			}
			continue
		case <-timer.C():
			if deferred {
				continue // the deferred refusal, not a renewal
			}
		}
		if r.adoptKubeconfig(ctx) {
			logger.Info("Using the new hub token of the kubeconfig", "serviceAccount", r.Current().Namespace+"/"+r.Current().ServiceAccount,
				"uid", r.Current().UID, "expires", r.Current().Expiry)
			failures = 0
			continue
		}
		if r.opts.Store != nil && r.adoptStored(ctx) {
			logger.Info("Using a newer hub token written by another process", "expires", r.Current().Expiry)
			failures = 0
			continue
		}
		if err := r.renewOnce(ctx, hub, m, t, events); err != nil {
			failures++
			now := r.opts.Clock.Now()
			if cur := r.Current(); cur.Raw != warned && ExpiringSoon(cur, r.opts.RenewFraction, r.seenAt(), now) {
				warned = cur.Raw
				logger.Error(err, "The hub token expires soon and cannot be renewed; the cluster goes silent on the hub when it does",
					"expires", cur.Expiry, "failures", failures)
				events.event(ctx, corev1.EventTypeWarning, ReasonExpiringSoon,
					"The agent's hub token (%s/%s) expires at %s and renewing it has failed %d times (last: %v); mint a new one with `hub agent-kubeconfig` if this persists",
					cur.Namespace, cur.ServiceAccount, cur.Expiry.UTC().Format(time.RFC3339), failures, err)
			}
			continue
		}
		failures = 0
	}
}

// renewOnce requests a successor of the current token for the same
// ServiceAccount, authenticating with the current one.
func (r *Renewer) renewOnce(ctx context.Context, hub kubernetes.Interface, m *agentmetrics.Metrics, t *trackers, events *eventer) error {
	logger := klog.FromContext(ctx)
	cur := r.Current()
	lifetime := RequestedLifetime(cur, r.opts.Lifetime, r.seenAt())
	reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	tr, err := hub.CoreV1().ServiceAccounts(cur.Namespace).CreateToken(reqCtx, cur.ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime / time.Second))},
	}, metav1.CreateOptions{})
	var next Token
	if err == nil {
		if next, err = Parse(tr.Status.Token); err == nil && !next.SameIdentity(cur) {
			err = fmt.Errorf("the hub returned a token for %s/%s (uid %s), not for %s/%s (uid %s)",
				next.Namespace, next.ServiceAccount, next.UID, cur.Namespace, cur.ServiceAccount, cur.UID)
		}
	}
	t.renew.Observe(logger, err, "serviceAccount", cur.Namespace+"/"+cur.ServiceAccount)
	if err != nil {
		if m != nil {
			m.HubTokenRenewals.WithLabelValues(resultError).Inc()
		}
		return err
	}
	r.set(next)
	if m != nil {
		m.HubTokenRenewals.WithLabelValues(resultSuccess).Inc()
		m.HubTokenExpiration.Set(float64(next.Expiry.Unix()))
	}
	logger.V(2).Info("Renewed the hub token", "expires", next.Expiry, "previousExpiry", cur.Expiry)
	events.event(ctx, corev1.EventTypeNormal, ReasonRenewed, "Renewed the agent's hub token (%s/%s); the new one expires at %s",
		next.Namespace, next.ServiceAccount, next.Expiry.UTC().Format(time.RFC3339))
	if r.opts.Store != nil {
		// Not persisting costs only a restart's worth of safety: the token
		// in use is fine, so this is logged (once per change), not retried.
		saveCtx, cancel := context.WithTimeout(ctx, requestTimeout)
		perr := r.opts.Store.Save(saveCtx, next)
		cancel()
		t.persist.Observe(logger, perr, "store", r.opts.Store.String())
	}
	return nil
}

// trackers log each hub operation's failures once per change of reason.
type trackers struct{ renew, persist *hubconn.Tracker }

// eventer records events on the Cluster, reading its UID once so that
// `kubectl describe cluster` finds them.
type eventer struct {
	cluster  string
	flotilla flotillaclient.Interface
	recorder record.EventRecorder
	uid      string
}

func (e *eventer) event(ctx context.Context, eventType, reason, format string, args ...any) {
	if e.recorder == nil {
		return
	}
	if e.uid == "" && e.flotilla != nil {
		reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
		c, err := e.flotilla.ClusterV1alpha1().Clusters().Get(reqCtx, e.cluster, metav1.GetOptions{})
		cancel()
		if err == nil {
			e.uid = string(c.UID)
		}
	}
	obj := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: e.cluster, UID: types.UID(e.uid)}}
	e.recorder.Eventf(obj, eventType, reason, format, args...)
}

var _ oauth2.TokenSource = (*Renewer)(nil)
