package hubtoken

import (
	"context"
	"fmt"
	"os"
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
	// Clock; nil is the real one.
	Clock clock.WithTicker
}

// Renewer holds the agent's hub token and renews it. It is the oauth2
// TokenSource of every hub client (see New).
type Renewer struct {
	opts Options
	// tokenFile is the kubeconfig's token file, re-read on every wake-up so
	// a token an admin rotates there is still picked up; "" if inline.
	tokenFile string

	mu      sync.RWMutex
	current Token
	seen    time.Time // when current was adopted (its issue time if iat is missing)
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
	r := &Renewer{opts: opts, tokenFile: cfg.BearerTokenFile}
	r.set(tok)
	if opts.Store != nil {
		r.adoptStored(ctx)
	}
	logger.Info("Renewing the hub token before it expires", "serviceAccount", tok.Namespace+"/"+tok.ServiceAccount,
		"expires", r.Current().Expiry, "renewAt", RenewAt(r.Current(), opts.RenewFraction, r.seenAt()), "store", storeName(opts.Store))

	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Wrap(transport.TokenSourceWrapTransport(r))
	return r, nil
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

func (r *Renewer) adoptFile(ctx context.Context) bool {
	data, err := os.ReadFile(r.tokenFile)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Re-reading the hub kubeconfig's token file", "path", r.tokenFile)
		return false
	}
	t, err := Parse(string(data))
	return err == nil && r.adopt(t)
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
		timer := r.opts.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		if (r.opts.Store != nil && r.adoptStored(ctx)) || (r.tokenFile != "" && r.adoptFile(ctx)) {
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
