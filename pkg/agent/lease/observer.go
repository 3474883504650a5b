package lease

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
)

// Observation is what an agent knows about the hub Lease: who held it when it
// last changed, and when THIS agent saw that change on its own clock. The
// renewTime inside the Lease is written with the writer's clock and is never
// used to judge another agent.
type Observation struct {
	// Seen is false until the Lease (or its absence) has been read once.
	Seen bool
	// Holder is the holderIdentity of the newest version seen ("" for none
	// or for no Lease).
	Holder string
	// ResourceVersion of the newest version seen.
	ResourceVersion string
	// ChangedAt is when this agent first saw that version.
	ChangedAt time.Time
}

// OtherHolderActive is the fence every hub-facing write passes: another agent
// (holder ≠ self) changed the hub Lease less than window ago, as observed by
// this agent. An empty holder (a new or released Lease) blocks nobody, and
// without an observation there is no evidence against writing.
func OtherHolderActive(o Observation, self string, now time.Time, window time.Duration) bool {
	return o.Seen && o.Holder != "" && o.Holder != self && now.Sub(o.ChangedAt) < window
}

// ErrOtherHolder says another agent is heartbeating on the hub Lease.
type ErrOtherHolder struct {
	Holder string
	// Since is how long ago this agent saw the holder's latest change.
	Since time.Duration
}

func (e *ErrOtherHolder) Error() string {
	return fmt.Sprintf("agent %s renewed the hub Lease %s ago: it speaks for this cluster, this agent stands down", e.Holder, e.Since.Round(time.Millisecond))
}

// ObserverOptions configure an Observer.
type ObserverOptions struct {
	Cluster string
	// Self is this agent's identity (the holderIdentity it writes).
	Self string
	// Window is how recent another holder's change must be to count as
	// active. It must exceed RenewInterval + Period, so an agent that renews
	// on time always looks active to a peer that polls.
	Window time.Duration
	// Period is how often Run reads the Lease.
	Period  time.Duration
	Clock   clock.Clock
	Metrics *agentmetrics.Metrics
}

// DefaultObserverTiming derives the poll period and the activity window from
// the heartbeat's renew interval: read every quarter interval, and call a
// holder active for 1.5 intervals after its last change (a holder renewing on
// time is seen to change at most 1.25 intervals apart). A successor of a holder
// that stopped without releasing may renew 1.75 intervals (17.5s with the
// defaults) after the holder's last renewal: less than the election lease a
// successor waits anyway after a crash, and inside the hub's 40s grace period.
func DefaultObserverTiming(renewInterval time.Duration) (period, window time.Duration) {
	return renewInterval / 4, renewInterval * 3 / 2
}

// Observer keeps this agent's Observation of the hub Lease. Every agent pod
// runs one from its start, leader or not, so that a new leader already knows
// whether the previous holder is still renewing.
type Observer struct {
	client  kubernetes.Interface
	opts    ObserverOptions
	tracker *hubconn.Tracker

	mu     sync.Mutex
	obs    Observation
	polled chan struct{} // closed after the first read attempt
	once   sync.Once
}

// NewObserver returns an Observer of opts.Cluster's Lease on the hub.
func NewObserver(client kubernetes.Interface, opts ObserverOptions) *Observer {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Observer{client: client, opts: opts, polled: make(chan struct{}),
		tracker: hubconn.NewTracker("get-lease", opts.Metrics)}
}

// Observe records a version of the Lease (nil: there is none). A version
// older than the newest seen is ignored, so a slow read cannot resurrect a
// holder that a newer write already replaced.
func (o *Observer) Observe(l *coordinationv1.Lease) {
	holder, rv := "", ""
	if l != nil {
		holder, rv = ptr.Deref(l.Spec.HolderIdentity, ""), l.ResourceVersion
	}
	now := o.opts.Clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.obs.Seen {
		if rv == o.obs.ResourceVersion && holder == o.obs.Holder {
			return
		}
		if rv != "" && o.obs.ResourceVersion != "" {
			if cmp, err := resourceversion.CompareResourceVersion(rv, o.obs.ResourceVersion); err == nil && cmp < 0 {
				return
			}
		}
	}
	o.obs = Observation{Seen: true, Holder: holder, ResourceVersion: rv, ChangedAt: now}
}

// Observation returns what this agent has seen.
func (o *Observer) Observation() Observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.obs
}

// Check returns an *ErrOtherHolder while another agent is active on the hub
// Lease, from what has been observed so far.
func (o *Observer) Check() error {
	obs := o.Observation()
	now := o.opts.Clock.Now()
	if OtherHolderActive(obs, o.opts.Self, now, o.opts.Window) {
		return &ErrOtherHolder{Holder: obs.Holder, Since: now.Sub(obs.ChangedAt)}
	}
	return nil
}

// CheckFresh reads the Lease first, then checks: for writes that must not
// rest on a cached view (a not-Ready status). A failed read is no evidence of
// another holder; it falls back to what was seen before.
func (o *Observer) CheckFresh(ctx context.Context) error {
	_ = o.Poll(ctx)
	return o.Check()
}

// Poll reads the Lease once and records it.
func (o *Observer) Poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	l, err := o.client.CoordinationV1().Leases(Namespace(o.opts.Cluster)).Get(ctx, o.opts.Cluster, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		o.Observe(nil)
		err = nil // the heartbeat reports a missing Lease; for the fence it holds nobody
	case err == nil:
		o.Observe(l)
	}
	o.once.Do(func() { close(o.polled) })
	return err
}

// WaitPolled blocks until the first read attempt finished (whatever its
// result) or ctx is done, so an agent does not campaign before it has had a
// chance to see a live holder.
func (o *Observer) WaitPolled(ctx context.Context) error {
	select {
	case <-o.polled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run reads the Lease every Period until ctx is done.
func (o *Observer) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(Namespace(o.opts.Cluster), o.opts.Cluster))
	for {
		err := o.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		o.tracker.Observe(logger, err)
		select {
		case <-ctx.Done():
			return
		case <-o.opts.Clock.After(o.opts.Period):
		}
	}
}
