package cmdutil

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// LeaderElectionOptions are the leader-election flags both binaries share,
// spelled as in Kubernetes and Karmada components.
type LeaderElectionOptions struct {
	LeaderElect       bool
	ResourceNamespace string
	ResourceName      string
	LeaseDuration     time.Duration
	RenewDeadline     time.Duration
	RetryPeriod       time.Duration
}

// DefaultLeaderElection returns Karmada's defaults (15s/10s/2s) for a Lease
// namespace/name.
func DefaultLeaderElection(namespace, name string) LeaderElectionOptions {
	return LeaderElectionOptions{
		LeaderElect:       true,
		ResourceNamespace: namespace,
		ResourceName:      name,
		LeaseDuration:     15 * time.Second,
		RenewDeadline:     10 * time.Second,
		RetryPeriod:       2 * time.Second,
	}
}

// AddFlags registers the options; where says which cluster holds the Lease
// ("host cluster", "member cluster").
func (le *LeaderElectionOptions) AddFlags(fs *pflag.FlagSet, component, where string) {
	fs.BoolVar(&le.LeaderElect, "leader-elect", le.LeaderElect, fmt.Sprintf("Elect one active %s with a Lease on the %s.", component, where))
	fs.StringVar(&le.ResourceNamespace, "leader-elect-resource-namespace", le.ResourceNamespace, fmt.Sprintf("Namespace of the %s's leader-election Lease.", component))
	fs.StringVar(&le.ResourceName, "leader-elect-resource-name", le.ResourceName, fmt.Sprintf("Name of the %s's leader-election Lease.", component))
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration, "How long a non-leader waits before taking over an unrenewed Lease.")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline, "How long the leader keeps trying to renew before it stops leading.")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod, "Interval between leader-election attempts.")
}

// Validate reports inconsistent durations.
func (le LeaderElectionOptions) Validate() error {
	if le.LeaderElect && !(le.LeaseDuration > le.RenewDeadline && le.RenewDeadline > le.RetryPeriod && le.RetryPeriod > 0) {
		return fmt.Errorf("leader election needs --leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0")
	}
	if le.LeaderElect && (le.ResourceNamespace == "" || le.ResourceName == "") {
		return fmt.Errorf("--leader-elect-resource-namespace and --leader-elect-resource-name must not be empty")
	}
	return nil
}
