package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/agent/app"
)

// validOptions are the defaults plus the two required flags.
func validOptions() *app.Options {
	o := app.NewOptions()
	o.ClusterName = "member1"
	o.HubKubeconfig = "/etc/flotilla/hub.kubeconfig"
	return o
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*app.Options)
		want   []string // substrings of the error; none: valid
	}{
		{"defaults with the required flags", func(*app.Options) {}, nil},
		{"required flags missing", func(o *app.Options) { o.ClusterName, o.HubKubeconfig = "", "" },
			[]string{"--cluster-name is required", "--hub-kubeconfig is required"}},
		{"dns quorum 0", func(o *app.Options) { o.DNSQuorum = "0" }, []string{"--dns-quorum"}},
		{"dns quorum majority", func(o *app.Options) { o.DNSQuorum = "majority" }, nil},
		{"lease renew fraction 1.5", func(o *app.Options) { o.ClusterLeaseRenewIntervalFraction = 1.5 },
			[]string{"--cluster-lease-renew-interval-fraction"}},
		{"lease renew fraction 0", func(o *app.Options) { o.ClusterLeaseRenewIntervalFraction = 0 },
			[]string{"--cluster-lease-renew-interval-fraction"}},
		// A verdict must survive a missed probe before it goes stale.
		{"stale threshold under twice the detect period", func(o *app.Options) {
			o.DNSDetectPeriod, o.DNSStaleThreshold = 5*time.Second, 9*time.Second
		}, []string{"--dns-stale-threshold"}},
		{"stale threshold exactly twice the detect period", func(o *app.Options) {
			o.DNSDetectPeriod, o.DNSStaleThreshold = 5*time.Second, 10*time.Second
		}, nil},
		{"zero thresholds (no damping) are allowed for a single agent", func(o *app.Options) {
			o.LeaderElection.LeaderElect = false
			o.ClusterFailureThreshold, o.ClusterSuccessThreshold, o.DNSFailureThreshold, o.DNSSuccessThreshold = 0, 0, 0, 0
		}, nil},
		// One writer per member: a leader cut off from the member alone
		// must step down (within the election lease) before its failure
		// threshold could make it report an outage others do not see.
		{"cluster failure threshold equal to the election lease", func(o *app.Options) {
			o.ClusterFailureThreshold = o.LeaderElection.LeaseDuration
		}, []string{"--cluster-failure-threshold (15s) must be longer than --leader-elect-lease-duration (15s)"}},
		{"zero cluster failure threshold with leader election", func(o *app.Options) { o.ClusterFailureThreshold = 0 },
			[]string{"--cluster-failure-threshold (0s) must be longer than --leader-elect-lease-duration"}},
		{"cluster failure threshold just past the election lease", func(o *app.Options) {
			o.ClusterFailureThreshold = o.LeaderElection.LeaseDuration + time.Second
		}, nil},
		{"negative cluster failure threshold", func(o *app.Options) { o.ClusterFailureThreshold = -time.Second },
			[]string{"--cluster-failure-threshold must not be negative"}},
		{"negative cluster success threshold", func(o *app.Options) { o.ClusterSuccessThreshold = -time.Second },
			[]string{"--cluster-success-threshold must not be negative"}},
		{"negative dns failure threshold", func(o *app.Options) { o.DNSFailureThreshold = -time.Second },
			[]string{"--dns-failure-threshold must not be negative"}},
		{"negative dns success threshold", func(o *app.Options) { o.DNSSuccessThreshold = -time.Second },
			[]string{"--dns-success-threshold must not be negative"}},
		{"leader renew deadline equal to the lease duration", func(o *app.Options) {
			o.LeaderElection.RenewDeadline = o.LeaderElection.LeaseDuration
		}, []string{"--leader-elect-lease-duration > --leader-elect-renew-deadline"}},
		{"leader election durations do not matter without leader election", func(o *app.Options) {
			o.LeaderElection.LeaderElect = false
			o.LeaderElection.RenewDeadline = o.LeaderElection.LeaseDuration
		}, nil},
		{"several problems are all reported", func(o *app.Options) {
			o.ClusterName = ""
			o.DNSQuorum = "x"
			o.ClusterLeaseRenewIntervalFraction = 1.5
			o.DNSFailureThreshold = -time.Second
			o.DNSDetectPeriod = 0
			o.ConcurrentWorkSyncs = 0
		}, []string{"--cluster-name", "--dns-quorum", "--cluster-lease-renew-interval-fraction",
			"--dns-failure-threshold", "--dns-detect-period must be positive", "--concurrent-work-syncs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.mutate(o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// One line per problem, nothing else reported.
			if got := strings.Count(err.Error(), "\n  "); got != len(tc.want) {
				t.Errorf("error reports %d problems, want %d:\n%v", got, len(tc.want), err)
			}
		})
	}
}
