// Package leader elects the one agent pod per member that talks to the hub,
// with client-go leader election on a Lease in the member cluster, and keeps
// it the only one.
//
// One writer per member, by two rules:
//
//   - A leader that has not renewed the member Lease for the renew deadline
//     (--leader-elect-renew-deadline, shorter than the lease duration) stops
//     all hub-facing work at once, counted from the start of its last renewal
//     that reached the apiserver. Another pod can take the Lease only a lease
//     duration after it saw that renewal, so the two never overlap. client-go
//     alone stops the work only after it has also tried to release the Lease,
//     which against an unreachable apiserver takes another renew deadline.
//   - A pod that sees another agent renew the hub Lease (the Fence) does not
//     campaign, and a leader that sees it steps down and releases the member
//     Lease, so the pod the hub hears from is the one that leads.
//
// The price is paid in a member-wide apiserver outage: nobody can renew, so
// nobody leads, the hub Lease goes stale and the hub marks the cluster
// Ready=Unknown after its grace period, rather than the agent reporting
// Ready=False/ClusterNotReachable. That is the safe side: when only the
// leader's node loses the apiserver, the cut-off leader steps down before its
// failure threshold (which must exceed the lease duration) could make it
// report an outage the other pods do not see.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
)

// Reasons a leader steps down (the "reason" label of
// flotilla_agent_leader_step_downs_total).
const (
	// ReasonMemberLeaseNotRenewed: no renewal of the member Lease reached
	// the apiserver for the renew deadline.
	ReasonMemberLeaseNotRenewed = "MemberLeaseNotRenewed"
	// ReasonHubLeaseHeldByOther: another agent renews the hub Lease.
	ReasonHubLeaseHeldByOther = "HubLeaseHeldByOther"
)

// Identity returns a leader-election identity for an agent on node: unique
// per process, readable in `kubectl get lease`.
func Identity(node string) string {
	if node == "" {
		node, _ = os.Hostname()
	}
	return fmt.Sprintf("%s_%s", node, uuid.NewString()[:8])
}

// StepDown is the decision a leader takes every retry period: it must stop if
// its last member Lease renewal that reached the apiserver started renewDeadline
// ago or more, or if the fence reports another agent speaking for the
// cluster. It returns the reason, "" to keep leading.
func StepDown(now, renewedAt time.Time, renewDeadline time.Duration, fenceErr error) string {
	switch {
	case !now.Before(renewedAt.Add(renewDeadline)):
		return ReasonMemberLeaseNotRenewed
	case fenceErr != nil:
		return ReasonHubLeaseHeldByOther
	default:
		return ""
	}
}

// renewalLock records when the last write that made this agent holder began
// (on this agent's clock, before the request left), which is no later than
// the moment any other pod can have seen it. It also refuses to take the
// Lease (a write naming this agent over another or no holder) while the fence
// reports another agent on the hub, so the elector keeps watching the member
// Lease but acquires only once the hub has gone quiet.
type renewalLock struct {
	resourcelock.Interface
	clock clock.PassiveClock
	fence func() error

	mu      sync.Mutex
	renewed time.Time
	holder  string // holder per the last record read or written
}

func (l *renewalLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ler, raw, err := l.Interface.Get(ctx)
	if err == nil && ler != nil {
		l.mu.Lock()
		l.holder = ler.HolderIdentity
		l.mu.Unlock()
	}
	return ler, raw, err
}

func (l *renewalLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := l.mayTake(ler); err != nil {
		return err
	}
	start := l.clock.Now()
	err := l.Interface.Create(ctx, ler)
	l.record(start, ler, err)
	return err
}

func (l *renewalLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := l.mayTake(ler); err != nil {
		return err
	}
	start := l.clock.Now()
	err := l.Interface.Update(ctx, ler)
	l.record(start, ler, err)
	return err
}

// mayTake refuses an acquisition (not a renewal, not a release) while the
// fence blocks.
func (l *renewalLock) mayTake(ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	acquiring := ler.HolderIdentity == l.Identity() && l.holder != l.Identity()
	l.mu.Unlock()
	if !acquiring || l.fence == nil {
		return nil
	}
	if err := l.fence(); err != nil {
		return fmt.Errorf("not taking the agent leader Lease: %w", err)
	}
	return nil
}

func (l *renewalLock) record(start time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holder = ler.HolderIdentity
	if ler.HolderIdentity == l.Identity() && start.After(l.renewed) {
		l.renewed = start
	}
}

func (l *renewalLock) renewedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

// Options configure Run.
type Options struct {
	cmdutil.LeaderElectionOptions
	Identity string
	Metrics  *agentmetrics.Metrics
	// Watchdog, when set, is checked by /healthz.
	Watchdog *leaderelection.HealthzAdaptor
	// Fence, when set, reports another agent speaking for the cluster on the
	// hub (non-nil error). Run does not take the member Lease while it does,
	// and a leader that sees it steps down and releases the member Lease.
	Fence func() error
	// FenceReady, when set, blocks until Fence has had its first look.
	FenceReady func(context.Context) error
	Clock      clock.Clock
}

// Run calls lead while this agent is the leader, and campaigns again after
// losing, until ctx is done. lead's context is cancelled the moment this
// agent must stop speaking for the cluster (see the package comment), and Run
// waits for lead to return before campaigning again, so two leaders never
// overlap in this process.
func Run(ctx context.Context, member kubernetes.Interface, opts Options, lead func(context.Context)) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	logger := klog.FromContext(ctx)
	r := &runner{root: ctx, opts: opts, logger: logger, lead: lead}
	if opts.FenceReady != nil {
		if err := opts.FenceReady(ctx); err != nil {
			return nil // ctx done
		}
	}
	if !opts.LeaderElect {
		// No member Lease: only the fence can end a term.
		for ctx.Err() == nil {
			if !r.waitFence(ctx) {
				return nil
			}
			termCtx, endTerm := context.WithCancel(ctx)
			r.term(termCtx, endTerm, nil)
			endTerm()
			r.pause(ctx)
		}
		return nil
	}
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.ResourceNamespace, opts.ResourceName,
		member.CoreV1(), member.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: opts.Identity})
	if err != nil {
		return err
	}
	lock := &renewalLock{Interface: inner, clock: opts.Clock, fence: opts.Fence}
	for ctx.Err() == nil {
		// Ending the term (cancelling termCtx) makes the elector release
		// the member Lease: the way to step down on purpose.
		termCtx, endTerm := context.WithCancel(ctx)
		var (
			mu      sync.Mutex
			over    bool
			running sync.WaitGroup
		)
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   opts.LeaseDuration,
			RenewDeadline:   opts.RenewDeadline,
			RetryPeriod:     opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            "flotilla-agent",
			WatchDog:        opts.Watchdog,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leadCtx context.Context) {
					mu.Lock()
					if over || leadCtx.Err() != nil { // the term ended before this goroutine ran
						mu.Unlock()
						return
					}
					running.Add(1)
					mu.Unlock()
					defer running.Done()
					r.term(leadCtx, endTerm, lock.renewedAt)
				},
				OnStoppedLeading: func() {
					if ctx.Err() == nil {
						logger.V(2).Info("Member leader election term over", "identity", opts.Identity)
					}
				},
				OnNewLeader: func(identity string) {
					if identity != opts.Identity {
						logger.Info("Agent leader", "identity", identity)
					}
				},
			},
		})
		if err != nil {
			endTerm()
			return err
		}
		elector.Run(termCtx)
		endTerm()
		mu.Lock()
		over = true
		mu.Unlock()
		running.Wait()
		r.pause(ctx)
	}
	return nil
}

type runner struct {
	root   context.Context // the agent's: done only when it stops
	opts   Options
	logger klog.Logger
	lead   func(context.Context)
}

// waitFence blocks until the fence lets this agent lead; false when ctx is
// done first. Only without leader election: with it, the lock waits.
func (r *runner) waitFence(ctx context.Context) bool {
	logged := false
	for {
		if ctx.Err() != nil {
			return false
		}
		err := r.fence()
		if err == nil {
			return true
		}
		if !logged {
			r.logger.Info("Not campaigning for leadership", "reason", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.opts.Clock.After(r.opts.RetryPeriod):
		}
	}
}

func (r *runner) fence() error {
	if r.opts.Fence == nil {
		return nil
	}
	return r.opts.Fence()
}

// term runs lead while StepDown says so, and ends the term when it does not.
// renewedAt is nil without leader election.
func (r *runner) term(ctx context.Context, endTerm context.CancelFunc, renewedAt func() time.Time) {
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var decide func() (string, error)
	// Writers ask Check(ctx) right before each write, so a leader that was
	// frozen past its deadline (a paused process, a stalled node) cannot slip
	// one last write in before this loop wakes up and ends the term.
	workCtx = context.WithValue(workCtx, termKey{}, func() error {
		if reason, err := decide(); reason != "" {
			return fmt.Errorf("%s: %w", reason, errStepDown(err))
		}
		return nil
	})
	decide = func() (string, error) {
		fenceErr := r.fence()
		if renewedAt == nil {
			if fenceErr != nil {
				return ReasonHubLeaseHeldByOther, fenceErr
			}
			return "", nil
		}
		return StepDown(r.opts.Clock.Now(), renewedAt(), r.opts.RenewDeadline, fenceErr), fenceErr
	}
	if reason, err := decide(); reason != "" {
		r.stepDown(reason, err)
		endTerm()
		return
	}

	r.logger.Info("Became the agent leader", "identity", r.opts.Identity)
	setLeader(r.opts.Metrics, true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.lead(workCtx)
	}()
	for {
		wait := r.opts.RetryPeriod
		if renewedAt != nil {
			// Wake exactly at the renewal deadline, not up to a retry
			// period after it.
			wait = min(wait, renewedAt().Add(r.opts.RenewDeadline).Sub(r.opts.Clock.Now()))
		}
		select {
		case <-done:
			// lead gave up on its own: do not hold the Lease without working.
			setLeader(r.opts.Metrics, false)
			endTerm()
			return
		case <-workCtx.Done():
			setLeader(r.opts.Metrics, false)
			if r.root.Err() == nil {
				// The elector gave up renewing before this loop woke at
				// the same deadline: the same step-down, counted once.
				r.stepDown(ReasonMemberLeaseNotRenewed, nil)
			}
			<-done
			return
		case <-r.opts.Clock.After(max(wait, 0)):
		}
		if reason, err := decide(); reason != "" {
			// Stop the work first: the elector's release may take up to a
			// renew deadline against an unreachable apiserver. From here
			// every writer's Check fails, so this agent no longer speaks
			// for the cluster even while its work winds down.
			stopWork()
			setLeader(r.opts.Metrics, false)
			r.stepDown(reason, err)
			stopping := r.opts.Clock.Now()
			<-done
			if took := r.opts.Clock.Since(stopping); took > r.opts.RenewDeadline {
				r.logger.Info("Hub-facing work took long to stop after stepping down", "identity", r.opts.Identity, "took", took)
			}
			endTerm()
			return
		}
	}
}

type termKey struct{}

func errStepDown(fenceErr error) error {
	if fenceErr != nil {
		return fenceErr
	}
	return ErrNotLeading
}

// ErrNotLeading is wrapped by Check's error when the term is over.
var ErrNotLeading = errors.New("this agent no longer leads")

// Check reports, for a context handed to lead, whether this agent must stop
// speaking for the cluster now (nil: it may write). Contexts not from Run
// always pass.
func Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeading, err)
	}
	if check, ok := ctx.Value(termKey{}).(func() error); ok {
		return check()
	}
	return nil
}

func (r *runner) stepDown(reason string, err error) {
	msg := "Stepping down: no member Lease renewal reached the apiserver for the renew deadline; hub-facing work stopped"
	if reason == ReasonHubLeaseHeldByOther {
		msg = "Stepping down: another agent speaks for this cluster on the hub; hub-facing work stopped"
	}
	r.logger.Info(msg, "identity", r.opts.Identity, "reason", reason, "renewDeadline", r.opts.RenewDeadline, "fence", err)
	if r.opts.Metrics != nil {
		r.opts.Metrics.LeaderStepDowns.WithLabelValues(reason).Inc()
	}
}

// pause waits a retry period before campaigning again, so a flapping Lease
// cannot turn into a tight loop.
func (r *runner) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-r.opts.Clock.After(r.opts.RetryPeriod):
	}
}

func setLeader(m *agentmetrics.Metrics, leading bool) {
	if m == nil {
		return
	}
	if leading {
		m.Leader.Set(1)
	} else {
		m.Leader.Set(0)
	}
}
