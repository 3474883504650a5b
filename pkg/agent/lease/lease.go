// Package lease renews the cluster's Lease on the hub: the heartbeat that
// tells the hub "this member's agent is alive and reaches the hub". Only the
// agent leader runs it.
//
// The hub owns the Lease (it creates it with the cluster's namespace); the
// agent only gets and updates it, so a missing Lease is reported and retried,
// never created with the agent's narrow credentials.
//
// One writer per member: holderIdentity names the agent that renews. An
// agent never takes the Lease over from another holder that this agent saw
// renew recently (Observer: judged on this agent's clock, by when it saw the
// Lease change), and it releases the Lease (empty holder, renewTime kept)
// when it stops, so a successor need not wait.
package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
)

// Namespace is the hub namespace holding a cluster's Lease and Works.
func Namespace(cluster string) string { return "flotilla-es-" + cluster }

// requestTimeout bounds one renewal so a hung hub connection cannot stall the
// heartbeat past the lease duration.
const requestTimeout = 10 * time.Second

// Options configure a Controller.
type Options struct {
	// Cluster names the Lease (Namespace(Cluster)/Cluster).
	Cluster string
	// HolderIdentity is written into the Lease: the agent that renewed it.
	HolderIdentity string
	// LeaseDuration is written as leaseDurationSeconds.
	LeaseDuration time.Duration
	// RenewInterval is the time between renewals.
	RenewInterval time.Duration
	// MayRenew, when set, is asked before each renewal; false skips it (the
	// agent has not verified that it works for this cluster).
	MayRenew func() bool
	// Observer, when set, is fed every version of the Lease this controller
	// reads or writes, and a renewal that would take the Lease from another
	// holder is refused while Observer.Check reports it active.
	Observer *Observer
	Clock    clock.Clock
	Metrics  *agentmetrics.Metrics
}

// Controller renews one Lease on the hub.
type Controller struct {
	client  kubernetes.Interface
	opts    Options
	tracker *hubconn.Tracker
	// latest is the Lease as last written, so a renewal is one write and
	// no read; a conflict or any error drops it.
	latest *coordinationv1.Lease
}

// NewController returns a heartbeat for opts.Cluster on the hub behind client.
func NewController(client kubernetes.Interface, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{client: client, opts: opts, tracker: hubconn.NewTracker("renew-lease", opts.Metrics)}
}

// Run renews the Lease every RenewInterval until ctx is done, then releases
// it. A failed renewal is retried with exponential backoff (1s doubling,
// capped at RenewInterval): quick enough to keep a Lease fresh through a short
// hub blip, never a spin.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(Namespace(c.opts.Cluster), c.opts.Cluster))
	logger.Info("Renewing the cluster's Lease on the hub", "interval", c.opts.RenewInterval, "duration", c.opts.LeaseDuration)
	backoff := c.newBackoff()
	for {
		delay := c.opts.RenewInterval
		if c.opts.MayRenew == nil || c.opts.MayRenew() {
			err := c.Renew(ctx)
			if ctx.Err() != nil {
				c.release(logger)
				return
			}
			var other *ErrOtherHolder
			if errors.As(err, &other) {
				// Not a hub failure: another agent speaks for the cluster
				// (the leader steps down on the same evidence).
				logger.Info("Not renewing the hub Lease", "reason", err)
			} else if c.tracker.Observe(logger, err) != "" {
				delay = backoff.Step()
			} else {
				backoff = c.newBackoff()
			}
		}
		select {
		case <-ctx.Done():
			c.release(logger)
			return
		case <-c.opts.Clock.After(delay):
		}
	}
}

// release clears holderIdentity if this agent's last write is still the
// newest version (the update is conditional on its resourceVersion), so the
// next leader sees nobody holding it and renews at once. renewTime stays: a
// release is not a heartbeat.
func (c *Controller) release(logger klog.Logger) {
	if c.latest == nil || ptr.Deref(c.latest.Spec.HolderIdentity, "") != c.opts.HolderIdentity {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	lease := c.latest.DeepCopy()
	lease.Spec.HolderIdentity = nil
	updated, err := c.client.CoordinationV1().Leases(Namespace(c.opts.Cluster)).Update(ctx, lease, metav1.UpdateOptions{})
	c.latest = nil
	if err != nil {
		logger.V(2).Info("Could not release the hub Lease", "err", err)
		return
	}
	c.observe(updated)
	logger.Info("Released the cluster's Lease on the hub")
}

func (c *Controller) newBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 64, Cap: c.opts.RenewInterval}
}

// Renew writes one renewal.
func (c *Controller) Renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	leases := c.client.CoordinationV1().Leases(Namespace(c.opts.Cluster))
	base := c.latest
	if base == nil {
		got, err := leases.Get(ctx, c.opts.Cluster, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.count(err)
			return fmt.Errorf("lease %s/%s not found on the hub (the hub creates it with the cluster's namespace): %w",
				Namespace(c.opts.Cluster), c.opts.Cluster, err)
		}
		if err != nil {
			c.count(err)
			return err
		}
		c.observe(got)
		base = got
	}
	if holder := ptr.Deref(base.Spec.HolderIdentity, ""); holder != "" && holder != c.opts.HolderIdentity && c.opts.Observer != nil {
		if err := c.opts.Observer.Check(); err != nil {
			c.latest = nil // read again next time
			return err
		}
	}
	lease := base.DeepCopy()
	now := metav1.NewMicroTime(c.opts.Clock.Now())
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != c.opts.HolderIdentity {
		lease.Spec.HolderIdentity = ptr.To(c.opts.HolderIdentity)
		lease.Spec.AcquireTime = &now
		if base.Spec.HolderIdentity != nil {
			lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		}
	}
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(c.opts.LeaseDuration / time.Second))
	lease.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	c.count(err)
	if err != nil {
		c.latest = nil
		return err
	}
	c.latest = updated
	c.observe(updated)
	return nil
}

func (c *Controller) observe(l *coordinationv1.Lease) {
	if c.opts.Observer != nil {
		c.opts.Observer.Observe(l)
	}
}

func (c *Controller) count(err error) {
	if c.opts.Metrics == nil {
		return
	}
	if err != nil {
		c.opts.Metrics.LeaseRenewals.WithLabelValues("error").Inc()
	} else {
		c.opts.Metrics.LeaseRenewals.WithLabelValues("success").Inc()
	}
}
