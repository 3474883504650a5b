package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	agentapp "github.com/flotilla-io/flotilla/agent/app"
	hubapp "github.com/flotilla-io/flotilla/hub/app"
)

// Timings are the agent and hub timers an environment runs with. Specs that
// wait a timer out, or bound how soon something may happen, read them here
// instead of assuming the defaults.
type Timings struct {
	// Agent: the hub Lease's leaseDurationSeconds (renewed every
	// RenewInterval), the leader's probe period, Ready's damping.
	ClusterLeaseDuration    time.Duration
	ClusterLeaseRenewFrac   float64
	StatusUpdateFrequency   time.Duration
	ClusterFailureThreshold time.Duration
	ClusterSuccessThreshold time.Duration
	// Agent: per-node DNS probing and the verdicts' damping.
	DNSDetectPeriod     time.Duration
	DNSFailureThreshold time.Duration
	DNSSuccessThreshold time.Duration
	DNSStaleThreshold   time.Duration
	// Agent: the member Lease that elects one leader among a member's agents.
	ElectionLease, ElectionRenewDeadline, ElectionRetryPeriod time.Duration
	// Hub: how long a cluster's Lease may stand still before Ready turns
	// Unknown, and how often that is checked.
	HubLeaseGrace, HubMonitorPeriod time.Duration
	// Hub: NoExecute this long after Ready left True, the default
	// not-ready/unreachable tolerations, a graceful eviction's grace period.
	FailoverEvictionTimeout  time.Duration
	DefaultTolerationSeconds int
	GracefulEvictionTimeout  time.Duration
	// Hub: its own leader election.
	HubElectionLease, HubElectionRenewDeadline, HubElectionRetryPeriod time.Duration
}

// DefaultTimings are the product's defaults for the agent and the hub's
// Lease grace, and FAST=1's demo-speed hub failover timers (NoExecute 20s
// after Unknown, default tolerations 5s, graceful grace 15s, hub election
// 4s): what `make up FAST=1` and the kind provider run.
func DefaultTimings() Timings {
	a, h := agentapp.NewOptions(), hubapp.NewOptions()
	return Timings{
		ClusterLeaseDuration:    a.ClusterLeaseDuration,
		ClusterLeaseRenewFrac:   a.ClusterLeaseRenewIntervalFraction,
		StatusUpdateFrequency:   a.ClusterStatusUpdateFrequency,
		ClusterFailureThreshold: a.ClusterFailureThreshold,
		ClusterSuccessThreshold: a.ClusterSuccessThreshold,
		DNSDetectPeriod:         a.DNSDetectPeriod,
		DNSFailureThreshold:     a.DNSFailureThreshold,
		DNSSuccessThreshold:     a.DNSSuccessThreshold,
		DNSStaleThreshold:       a.DNSStaleThreshold,
		ElectionLease:           a.LeaderElection.LeaseDuration,
		ElectionRenewDeadline:   a.LeaderElection.RenewDeadline,
		ElectionRetryPeriod:     a.LeaderElection.RetryPeriod,
		HubLeaseGrace:           h.ClusterMonitorGracePeriod,
		HubMonitorPeriod:        h.ClusterMonitorPeriod,
		// FAST=1 (hack/local-up.sh, kindFastHubFlags).
		FailoverEvictionTimeout:  20 * time.Second,
		DefaultTolerationSeconds: 5,
		GracefulEvictionTimeout:  15 * time.Second,
		HubElectionLease:         4 * time.Second,
		HubElectionRenewDeadline: 3 * time.Second,
		HubElectionRetryPeriod:   time.Second,
	}
}

// ShortTimings are what the suite's own local environment runs with: the
// same relations as the defaults at a fraction of the waiting.
//
//   - election lease (8s) < failure threshold (24s), as the agent insists:
//     a leader cut off from its member steps down before it could report;
//   - failure threshold + one renew interval (26s) < hub grace (28s): a
//     member-wide outage (no agent can lead) turns Ready Unknown only after
//     the failure threshold, as with the defaults (30s + 10s <= 40s);
//   - election takeover (8s + retries) + renew interval stays far inside
//     the hub grace, so a leader change never looks like silence;
//   - the failure threshold leaves the "short outage" spec (notice within
//     a status period or the renew deadline, 5s, kwokctl start: 17s on a
//     loaded machine with the defaults' 10s notice) room inside it;
//   - the renew deadline (6s) leaves a loaded machine's member apiserver
//     a few seconds per renewal before a leader steps down;
//   - NoExecute (12s) after Unknown stays well past the agents' renew
//     spread (2s), the fleet guard's period (2s) and the few seconds the
//     suite takes to stop every agent, so a whole-fleet outage is seen as
//     one before any NoExecute.
//
// The defaults themselves are proven elsewhere: agent/app's
// TestAgentDampsReadyWithTheDefaultThresholds runs the agent with them.
func ShortTimings() Timings {
	t := DefaultTimings()
	t.ClusterLeaseDuration = 8 * time.Second // renewed every 2s
	t.StatusUpdateFrequency = 2 * time.Second
	t.ClusterFailureThreshold = 24 * time.Second
	t.ClusterSuccessThreshold = 10 * time.Second
	t.DNSDetectPeriod = 2 * time.Second
	t.DNSFailureThreshold = 10 * time.Second
	t.DNSSuccessThreshold = 10 * time.Second
	t.DNSStaleThreshold = 20 * time.Second
	t.ElectionLease, t.ElectionRenewDeadline, t.ElectionRetryPeriod = 8*time.Second, 6*time.Second, time.Second
	t.HubLeaseGrace = 28 * time.Second
	t.HubMonitorPeriod = 2 * time.Second
	t.FailoverEvictionTimeout = 12 * time.Second
	t.DefaultTolerationSeconds = 3
	return t
}

// RenewInterval is how often the agent leader renews the hub Lease.
func (t Timings) RenewInterval() time.Duration {
	return time.Duration(float64(t.ClusterLeaseDuration) * t.ClusterLeaseRenewFrac)
}

// AgentFlags are the agent flags that set these timings.
func (t Timings) AgentFlags() []string {
	return []string{
		"--cluster-lease-duration=" + t.ClusterLeaseDuration.String(),
		fmt.Sprintf("--cluster-lease-renew-interval-fraction=%g", t.ClusterLeaseRenewFrac),
		"--cluster-status-update-frequency=" + t.StatusUpdateFrequency.String(),
		"--cluster-failure-threshold=" + t.ClusterFailureThreshold.String(),
		"--cluster-success-threshold=" + t.ClusterSuccessThreshold.String(),
		"--dns-detect-period=" + t.DNSDetectPeriod.String(),
		"--dns-failure-threshold=" + t.DNSFailureThreshold.String(),
		"--dns-success-threshold=" + t.DNSSuccessThreshold.String(),
		"--dns-stale-threshold=" + t.DNSStaleThreshold.String(),
		"--leader-elect-lease-duration=" + t.ElectionLease.String(),
		"--leader-elect-renew-deadline=" + t.ElectionRenewDeadline.String(),
		"--leader-elect-retry-period=" + t.ElectionRetryPeriod.String(),
	}
}

// HubFlags are the hub flags that set these timings (all of FAST=1's too).
func (t Timings) HubFlags() []string {
	return []string{
		"--cluster-monitor-grace-period=" + t.HubLeaseGrace.String(),
		"--cluster-monitor-period=" + t.HubMonitorPeriod.String(),
		"--failover-eviction-timeout=" + t.FailoverEvictionTimeout.String(),
		fmt.Sprintf("--default-not-ready-toleration-seconds=%d", t.DefaultTolerationSeconds),
		fmt.Sprintf("--default-unreachable-toleration-seconds=%d", t.DefaultTolerationSeconds),
		"--graceful-eviction-timeout=" + t.GracefulEvictionTimeout.String(),
		"--leader-elect-lease-duration=" + t.HubElectionLease.String(),
		"--leader-elect-renew-deadline=" + t.HubElectionRenewDeadline.String(),
		"--leader-elect-retry-period=" + t.HubElectionRetryPeriod.String(),
	}
}

// timingsFile records, in a local environment's state directory, the
// timings the suite started it with (a kept environment reused through
// E2E_STATE_DIR runs with them too); absent, the defaults apply.
const timingsFile = "e2e-timings.json"

func writeTimings(stateDir string, t Timings) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(stateDir, timingsFile), data, 0o644)
}

func readTimings(stateDir string) (Timings, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, timingsFile))
	if os.IsNotExist(err) {
		return DefaultTimings(), nil
	}
	if err != nil {
		return Timings{}, err
	}
	var t Timings
	if err := json.Unmarshal(data, &t); err != nil {
		return Timings{}, fmt.Errorf("%s: %w", timingsFile, err)
	}
	return t, nil
}
