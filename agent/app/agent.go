// Package app wires the agent binary: flags, the member and hub clients, the
// health and metrics server, leader election in the member, and the agent's
// controllers. The agent runs in its member cluster and dials out to the hub
// (pull mode); the hub never holds member credentials.
package app

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	"github.com/flotilla-io/flotilla/pkg/agent/execution"
	"github.com/flotilla-io/flotilla/pkg/agent/hubtoken"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	"github.com/flotilla-io/flotilla/pkg/version"
)

// Options are the agent's flags. Names follow karmada-agent where the concept
// is the same (--karmada-kubeconfig becomes --hub-kubeconfig).
type Options struct {
	ClusterName            string
	Kubeconfig             string
	Context                string
	HubKubeconfig          string
	HubContext             string
	KubeAPIQPS             float32
	KubeAPIBurst           int
	HubAPIQPS              float32
	HubAPIBurst            int
	MetricsBindAddress     string
	HealthProbeBindAddress string
	EnableProfiling        bool
	NodeName               string
	LeaderElection         cmdutil.LeaderElectionOptions

	// Health of the member, reported to the hub.
	ClusterStatusUpdateFrequency      time.Duration
	ClusterLeaseDuration              time.Duration
	ClusterLeaseRenewIntervalFraction float64
	ClusterFailureThreshold           time.Duration
	ClusterSuccessThreshold           time.Duration

	// In-cluster DNS probe.
	DNSProbe            bool
	DNSDetectPeriod     time.Duration
	DNSSuccessThreshold time.Duration
	DNSFailureThreshold time.Duration
	DNSStaleThreshold   time.Duration
	DNSProbeTimeout     time.Duration
	DNSServer           string
	ResolvConf          string
	ClusterDomain       string
	DNSQuorum           string

	// Hub credential renewal (pkg/agent/hubtoken).
	HubTokenRenewFraction float64
	HubTokenExpiration    time.Duration
	HubTokenSecret        string
	HubTokenFile          string

	// Works.
	ConcurrentWorkSyncs int
	OrphanGracePeriod   time.Duration
	FieldManager        string
	// Admin-level exceptions to what the agent refuses to apply.
	AllowedSystemNamespaces []string
	AllowFlotillaKinds      bool
}

// NewOptions returns the defaults (Karmada's where the flag exists there).
func NewOptions() *Options {
	return &Options{
		// Higher than Karmada's 40/60: after a failover an agent applies
		// a burst of Works, and its speed is the failover's speed. The hub's
		// API Priority and Fairness still protects the hub from any one agent.
		KubeAPIQPS:             100,
		KubeAPIBurst:           200,
		HubAPIQPS:              100,
		HubAPIBurst:            200,
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":10357",
		NodeName:               os.Getenv("NODE_NAME"),
		LeaderElection:         cmdutil.DefaultLeaderElection("flotilla-system", "flotilla-agent"),

		ClusterStatusUpdateFrequency:      10 * time.Second,
		ClusterLeaseDuration:              40 * time.Second,
		ClusterLeaseRenewIntervalFraction: 0.25,
		ClusterFailureThreshold:           30 * time.Second,
		ClusterSuccessThreshold:           30 * time.Second,

		DNSProbe:            true,
		DNSDetectPeriod:     5 * time.Second,
		DNSSuccessThreshold: 30 * time.Second,
		DNSFailureThreshold: 30 * time.Second,
		DNSStaleThreshold:   60 * time.Second,
		DNSProbeTimeout:     2 * time.Second,
		ResolvConf:          "/etc/resolv.conf",
		ClusterDomain:       "cluster.local",
		DNSQuorum:           "all",

		HubTokenRenewFraction: hubtoken.DefaultRenewFraction,
		HubTokenSecret:        "flotilla-agent-hub-token",

		ConcurrentWorkSyncs: 5,
		OrphanGracePeriod:   60 * time.Minute,
		FieldManager:        "flotilla-agent",
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "Name of the Cluster object on the hub this agent works for (required).")
	cmdutil.AddKubeconfigFlags(fs, &o.Kubeconfig, &o.Context, "the member cluster")
	// Never KUBECONFIG or ~/.kube/config: those are the user's, and a
	// fallback would connect the agent to the member as if it were the hub.
	fs.StringVar(&o.HubKubeconfig, "hub-kubeconfig", o.HubKubeconfig, "Path to the kubeconfig of the agent's own identity on the hub (required; KUBECONFIG and ~/.kube/config are not used for the hub).")
	fs.StringVar(&o.HubContext, "hub-context", o.HubContext, "The context in --hub-kubeconfig to use; empty means its current context.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS to the member cluster's apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst to the member cluster's apiserver.")
	fs.Float32Var(&o.HubAPIQPS, "hub-api-qps", o.HubAPIQPS, "QPS to the hub's apiserver.")
	fs.IntVar(&o.HubAPIBurst, "hub-api-burst", o.HubAPIBurst, "Burst to the hub's apiserver.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address serving /metrics; \"0\" disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address serving /healthz and /readyz; \"0\" disables it.")
	fs.BoolVar(&o.EnableProfiling, "profiling", o.EnableProfiling, "Serve Go's /debug/pprof/ on the metrics address (unauthenticated: keep it off where that address is reachable).")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Node this agent pod runs on (default $NODE_NAME, else the host name); names its DNS verdict.")
	o.LeaderElection.AddFlags(fs, "agent pod", "member cluster (its namespace also holds the nodes' DNS verdicts)")

	fs.DurationVar(&o.ClusterStatusUpdateFrequency, "cluster-status-update-frequency", o.ClusterStatusUpdateFrequency, "How often the leader probes the member apiserver and reconciles the Cluster status (written only when it changes).")
	fs.DurationVar(&o.ClusterLeaseDuration, "cluster-lease-duration", o.ClusterLeaseDuration, "leaseDurationSeconds written into the cluster's Lease on the hub.")
	fs.Float64Var(&o.ClusterLeaseRenewIntervalFraction, "cluster-lease-renew-interval-fraction", o.ClusterLeaseRenewIntervalFraction, "The Lease is renewed every cluster-lease-duration times this fraction.")
	fs.DurationVar(&o.ClusterFailureThreshold, "cluster-failure-threshold", o.ClusterFailureThreshold, "How long the member apiserver must fail before Ready turns False. Must be longer than --leader-elect-lease-duration, so a leader cut off from the member alone steps down before it could report an outage.")
	fs.DurationVar(&o.ClusterSuccessThreshold, "cluster-success-threshold", o.ClusterSuccessThreshold, "How long the member apiserver must succeed before Ready turns True again.")

	fs.BoolVar(&o.DNSProbe, "dns-probe", o.DNSProbe, "Probe in-cluster DNS from this pod's node and publish the node's verdict. Set false when the flotilla-dns-probe DaemonSet (agent dns-probe) covers every node, so each verdict Lease has one writer.")
	fs.DurationVar(&o.DNSDetectPeriod, "dns-detect-period", o.DNSDetectPeriod, "How often every agent pod probes in-cluster DNS through its node's resolver.")
	fs.DurationVar(&o.DNSSuccessThreshold, "dns-success-threshold", o.DNSSuccessThreshold, "How long a node's DNS must succeed before its verdict turns True.")
	fs.DurationVar(&o.DNSFailureThreshold, "dns-failure-threshold", o.DNSFailureThreshold, "How long a node's DNS must fail before its verdict turns False.")
	fs.DurationVar(&o.DNSStaleThreshold, "dns-stale-threshold", o.DNSStaleThreshold, "A node's DNS verdict older than this is ignored by the leader.")
	fs.DurationVar(&o.DNSProbeTimeout, "dns-probe-timeout", o.DNSProbeTimeout, "Timeout of one DNS query.")
	fs.StringVar(&o.DNSServer, "dns-server", o.DNSServer, "Resolver to probe (host:port); default: the first nameserver in --resolv-conf.")
	fs.StringVar(&o.ResolvConf, "resolv-conf", o.ResolvConf, "Resolver configuration of the node (used when --dns-server is empty).")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "The member's cluster domain; the probe resolves kubernetes.default.svc.<cluster-domain>.")
	fs.Float64Var(&o.HubTokenRenewFraction, "hub-token-renew-fraction", o.HubTokenRenewFraction, "The hub token (a ServiceAccount JWT from --hub-kubeconfig) is renewed with a TokenRequest for the agent's own ServiceAccount after this fraction of its lifetime.")
	fs.DurationVar(&o.HubTokenExpiration, "hub-token-expiration", o.HubTokenExpiration, "Lifetime requested for a renewed hub token; 0 requests the lifetime of the token it replaces (at least 10m, TokenRequest's minimum; the hub's apiserver may cap it).")
	fs.StringVar(&o.HubTokenSecret, "hub-token-secret", o.HubTokenSecret, "Secret in --leader-elect-resource-namespace of the member where the newest hub token is kept, so a restarted agent does not fall back to an expired kubeconfig token; empty keeps none. Ignored when --hub-token-file is set.")
	fs.StringVar(&o.HubTokenFile, "hub-token-file", o.HubTokenFile, "Writable file where the newest hub token is kept (for an agent run as a process), instead of --hub-token-secret.")
	fs.IntVar(&o.ConcurrentWorkSyncs, "concurrent-work-syncs", o.ConcurrentWorkSyncs, "Works synced in parallel.")
	fs.DurationVar(&o.OrphanGracePeriod, "orphan-grace-period", o.OrphanGracePeriod, "How long a managed member object whose Work vanished from the hub without its finalizer running is kept before it is deleted.")
	fs.StringVar(&o.FieldManager, "field-manager", o.FieldManager, "Server-side apply field manager for objects applied to the member.")
	fs.StringSliceVar(&o.AllowedSystemNamespaces, "allowed-system-namespaces", o.AllowedSystemNamespaces, "Protected namespaces (kube-system, kube-public, kube-node-lease, flotilla-system and --leader-elect-resource-namespace) that Works may nevertheless put objects in, or carry as Namespace objects. Default: none.")
	fs.BoolVar(&o.AllowFlotillaKinds, "allow-flotilla-kinds", o.AllowFlotillaKinds, "Let Works carry objects of Flotilla's own API groups (flotilla.io and *.flotilla.io); refused by default.")
	fs.StringVar(&o.DNSQuorum, "dns-quorum", o.DNSQuorum, "How many fresh node verdicts must fail to turn ServiceDomainNameResolutionReady False: all, majority, or a number of nodes.")
}

// Validate reports invalid flags.
func (o *Options) Validate() error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if o.ClusterName == "" {
		add("--cluster-name is required")
	}
	if o.HubKubeconfig == "" {
		add("--hub-kubeconfig is required")
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 || o.HubAPIQPS <= 0 || o.HubAPIBurst <= 0 {
		add("QPS and burst flags must be positive")
	}
	if err := o.LeaderElection.Validate(); err != nil {
		add("%v", err)
	}
	for name, d := range map[string]time.Duration{
		"--cluster-status-update-frequency": o.ClusterStatusUpdateFrequency,
		"--dns-detect-period":               o.DNSDetectPeriod,
		"--dns-probe-timeout":               o.DNSProbeTimeout,
	} {
		if d <= 0 {
			add("%s must be positive", name)
		}
	}
	for name, d := range map[string]time.Duration{
		"--cluster-failure-threshold": o.ClusterFailureThreshold,
		"--cluster-success-threshold": o.ClusterSuccessThreshold,
		"--dns-failure-threshold":     o.DNSFailureThreshold,
		"--dns-success-threshold":     o.DNSSuccessThreshold,
	} {
		if d < 0 {
			add("%s must not be negative", name)
		}
	}
	// One writer per member: a leader cut off from its member apiserver
	// steps down within the election lease; it must do so before its own
	// failure threshold could make it report an outage the other pods may
	// not see.
	if o.LeaderElection.LeaderElect && o.ClusterFailureThreshold >= 0 && o.ClusterFailureThreshold <= o.LeaderElection.LeaseDuration {
		add("--cluster-failure-threshold (%s) must be longer than --leader-elect-lease-duration (%s)", o.ClusterFailureThreshold, o.LeaderElection.LeaseDuration)
	}
	if o.ClusterLeaseDuration < time.Second {
		add("--cluster-lease-duration must be at least 1s")
	}
	if o.ClusterLeaseRenewIntervalFraction <= 0 || o.ClusterLeaseRenewIntervalFraction >= 1 {
		add("--cluster-lease-renew-interval-fraction must be in (0, 1)")
	}
	if o.DNSStaleThreshold < 2*o.DNSDetectPeriod || o.DNSStaleThreshold < time.Second {
		add("--dns-stale-threshold must be at least twice --dns-detect-period (and 1s)")
	}
	if o.HubTokenRenewFraction <= 0 || o.HubTokenRenewFraction >= 1 {
		add("--hub-token-renew-fraction must be in (0, 1)")
	}
	if o.HubTokenExpiration != 0 && o.HubTokenExpiration < hubtoken.MinLifetime {
		add("--hub-token-expiration must be 0 or at least %s (TokenRequest's minimum)", hubtoken.MinLifetime)
	}
	if o.ConcurrentWorkSyncs < 1 {
		add("--concurrent-work-syncs must be at least 1")
	}
	if o.OrphanGracePeriod < time.Minute {
		add("--orphan-grace-period must be at least 1m (a hub restored from backup must not look like deleted Works)")
	}
	if o.FieldManager == "" {
		add("--field-manager must not be empty")
	}
	for _, ns := range o.AllowedSystemNamespaces {
		if !slices.Contains(execution.ProtectedNamespaces(o.LeaderElection.ResourceNamespace), ns) {
			add("--allowed-system-namespaces: %q is not a protected namespace (%s)", ns, strings.Join(execution.ProtectedNamespaces(o.LeaderElection.ResourceNamespace), ", "))
		}
	}
	if _, err := dnsprobe.ParseQuorum(o.DNSQuorum); err != nil {
		add("--dns-quorum: %v", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// NewAgentCommand is the `agent` command.
func NewAgentCommand() *cobra.Command {
	opts := NewOptions()
	cmd := &cobra.Command{
		Use:          "agent",
		Short:        "Flotilla agent: reports its member cluster's health to the hub and applies its Works.",
		SilenceUsage: true,
		Version:      version.String(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			return Run(cmdutil.SignalContext(), opts)
		},
	}
	fs := cmd.Flags()
	opts.AddFlags(fs)
	cmdutil.AddKlogFlags(fs)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	cmd.AddCommand(NewDNSProbeCommand())
	return cmd
}
