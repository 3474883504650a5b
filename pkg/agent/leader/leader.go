// Package leader elects the one agent pod per member that talks to the hub,
// with client-go leader election on a Lease in the member cluster.
//
// One twist, on purpose: the leader keeps leading while the member apiserver
// is unreachable (connection refused, timeouts). Its job in that moment is
// the most important one it has, reporting ClusterNotReachable to the hub;
// plain leader election would make every agent step down exactly then and
// leave the hub guessing from a stale Lease. No other agent can take the
// Lease while the apiserver is down, so this cannot make two leaders in a
// member-wide outage. Any answer from the apiserver (a conflict, another
// holder, a 5xx) ends the tolerance, and a lost Lease stops hub-facing work
// at once.
package leader

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
)

// Identity returns a leader-election identity for an agent on node: unique
// per process, readable in `kubectl get lease`.
func Identity(node string) string {
	if node == "" {
		node, _ = os.Hostname()
	}
	return fmt.Sprintf("%s_%s", node, uuid.NewString()[:8])
}

// tolerantLock is a Lease lock that, once this agent holds the Lease, treats
// "the apiserver cannot be reached" on renewal as a renewal (see the package
// comment).
type tolerantLock struct {
	resourcelock.Interface
	logger klog.Logger

	mu         sync.Mutex
	held       bool // the last write that reached the apiserver made us holder
	tolerating bool
}

func (l *tolerantLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.mu.Lock()
	l.held = err == nil && ler.HolderIdentity == l.Identity()
	l.mu.Unlock()
	return err
}

func (l *tolerantLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		switch hubconn.Reason(err) {
		case hubconn.ReasonUnreachable, hubconn.ReasonTimeout:
			if l.held && ler.HolderIdentity == l.Identity() {
				if !l.tolerating {
					l.logger.Info("Member apiserver unreachable; keeping leadership to report it", "err", err)
					l.tolerating = true
				}
				return nil
			}
		}
		l.held = false
		return err
	}
	if l.tolerating {
		l.logger.Info("Member apiserver reachable again; leadership renewed normally")
		l.tolerating = false
	}
	l.held = ler.HolderIdentity == l.Identity()
	return nil
}

// Options configure Run.
type Options struct {
	cmdutil.LeaderElectionOptions
	Identity string
	Metrics  *agentmetrics.Metrics
	// Watchdog, when set, is checked by /healthz.
	Watchdog *leaderelection.HealthzAdaptor
}

// Run calls lead while this agent is the leader, and campaigns again after
// losing, until ctx is done. lead's context is cancelled the moment the
// Lease is lost, and Run waits for lead to return before campaigning again,
// so two leaders never overlap in this process.
func Run(ctx context.Context, member kubernetes.Interface, opts Options, lead func(context.Context)) error {
	logger := klog.FromContext(ctx)
	if !opts.LeaderElect {
		setLeader(opts.Metrics, true)
		lead(ctx)
		setLeader(opts.Metrics, false)
		return nil
	}
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.ResourceNamespace, opts.ResourceName,
		member.CoreV1(), member.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: opts.Identity})
	if err != nil {
		return err
	}
	lock := &tolerantLock{Interface: inner, logger: logger}
	for ctx.Err() == nil {
		var wg sync.WaitGroup
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   opts.LeaseDuration,
			RenewDeadline:   opts.RenewDeadline,
			RetryPeriod:     opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            "flotilla-agent",
			WatchDog:        opts.Watchdog,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					wg.Add(1)
					defer wg.Done()
					if ctx.Err() != nil {
						return // the term ended before this goroutine ran
					}
					logger.Info("Became the agent leader", "identity", opts.Identity)
					setLeader(opts.Metrics, true)
					lead(ctx)
				},
				OnStoppedLeading: func() {
					setLeader(opts.Metrics, false)
					if ctx.Err() == nil {
						logger.Info("Lost the agent leader Lease; hub-facing work stopped", "identity", opts.Identity)
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
			return err
		}
		elector.Run(ctx)
		wg.Wait()
		// A short pause before campaigning again, so a flapping Lease
		// cannot turn into a tight loop.
		select {
		case <-ctx.Done():
		case <-time.After(opts.RetryPeriod):
		}
	}
	return nil
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
