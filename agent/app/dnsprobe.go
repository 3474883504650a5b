package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	"github.com/flotilla-io/flotilla/pkg/agent/leader"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	"github.com/flotilla-io/flotilla/pkg/healthserver"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/version"
)

// `agent dns-probe` is the agent reduced to its per-node part: it probes
// in-cluster DNS through its node's resolver and publishes the node's verdict
// Lease, nothing else. It runs on every node (the flotilla-dns-probe
// DaemonSet) under an identity that may only write that Lease, so a node
// compromise does not hand out the hub token or the member-wide write role
// that only the leader-capable pods (the flotilla-agent Deployment) hold.

// dnsProbeFlags are the agent flags `agent dns-probe` shares, with the same
// defaults and meaning. Hub, leader-election and Works flags are left out on
// purpose: the probe refuses them instead of silently ignoring them.
var dnsProbeFlags = []string{
	"kubeconfig", "context", "kube-api-qps", "kube-api-burst",
	"metrics-bind-address", "health-probe-bind-address", "node-name",
	"dns-detect-period", "dns-success-threshold", "dns-failure-threshold", "dns-stale-threshold",
	"dns-probe-timeout", "dns-server", "resolv-conf", "cluster-domain",
}

// AddDNSProbeFlags registers the flags of `agent dns-probe` on fs, bound to o.
func (o *Options) AddDNSProbeFlags(fs *pflag.FlagSet) {
	// Taken from the agent's own flag set so help, defaults and bindings
	// cannot drift between the two commands.
	all := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.AddFlags(all)
	for _, name := range dnsProbeFlags {
		fs.AddFlag(all.Lookup(name))
	}
	fs.StringVar(&o.LeaderElection.ResourceNamespace, "namespace", o.LeaderElection.ResourceNamespace,
		"Namespace in the member cluster where the node's DNS verdict Lease is written: the agent's namespace (its leader reads the verdicts there).")
}

// ValidateDNSProbe reports invalid flags of `agent dns-probe`.
func (o *Options) ValidateDNSProbe() error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if o.LeaderElection.ResourceNamespace == "" {
		add("--namespace is required")
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		add("--kube-api-qps and --kube-api-burst must be positive")
	}
	if o.DNSDetectPeriod <= 0 {
		add("--dns-detect-period must be positive")
	}
	if o.DNSProbeTimeout <= 0 {
		add("--dns-probe-timeout must be positive")
	}
	if o.DNSFailureThreshold < 0 {
		add("--dns-failure-threshold must not be negative")
	}
	if o.DNSSuccessThreshold < 0 {
		add("--dns-success-threshold must not be negative")
	}
	if o.DNSStaleThreshold < 2*o.DNSDetectPeriod || o.DNSStaleThreshold < time.Second {
		add("--dns-stale-threshold must be at least twice --dns-detect-period (and 1s)")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags:\n  %s", strings.Join(errs, "\n  "))
	}
	return nil
}

// NewDNSProbeCommand is the `agent dns-probe` command.
func NewDNSProbeCommand() *cobra.Command {
	opts := NewOptions()
	cmd := &cobra.Command{
		Use:   "dns-probe",
		Short: "Probe in-cluster DNS from this node and publish the node's verdict; no hub access, no leadership.",
		Long: "Probe in-cluster DNS (kubernetes.default.svc.<cluster-domain>) through this node's resolver and publish the node's " +
			"damped verdict as the Lease flotilla-dns-<node> in --namespace of the member cluster, for the agent leader to aggregate. " +
			"Needs only get on its Node and get/create/update on that Lease; takes no hub kubeconfig.",
		SilenceUsage: true,
		Version:      version.String(),
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.ValidateDNSProbe(); err != nil {
				return err
			}
			return RunDNSProbe(cmdutil.SignalContext(), opts)
		},
	}
	fs := cmd.Flags()
	opts.AddDNSProbeFlags(fs)
	cmdutil.AddKlogFlags(fs)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	return cmd
}

// RunDNSProbe probes and publishes this node's DNS verdict until ctx is
// cancelled.
func RunDNSProbe(ctx context.Context, opts *Options) error {
	if opts.NodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name is empty and the host name is unknown: %w", err)
		}
		opts.NodeName = host
	}
	identity := leader.Identity(opts.NodeName)
	logger := klog.FromContext(ctx).WithValues("identity", identity)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting Flotilla DNS probe", "version", version.String(), "node", opts.NodeName, "namespace", opts.LeaderElection.ResourceNamespace)

	memberCfg, err := cmdutil.KubeconfigFlags{Kubeconfig: opts.Kubeconfig, Context: opts.Context}.RestConfig(opts.KubeAPIQPS, opts.KubeAPIBurst, "agent-dns-probe")
	if err != nil {
		return fmt.Errorf("member cluster: %w", err)
	}
	member, err := kubernetes.NewForConfig(memberCfg)
	if err != nil {
		return err
	}
	dnsServer := opts.DNSServer
	if dnsServer == "" {
		if dnsServer, err = dnsprobe.ResolverFromFile(opts.ResolvConf); err != nil {
			return fmt.Errorf("no --dns-server given: %w", err)
		}
	}

	registry := metrics.NewRegistry("agent-dns-probe")
	metrics.RegisterRESTClientMetrics(registry)
	m := agentmetrics.New(registry)
	server := healthserver.New(opts.HealthProbeBindAddress, opts.MetricsBindAddress, registry)
	server.AddReadyzCheck("member-apiserver", cmdutil.APIServerReady(member.Discovery().RESTClient()))
	runner := newDNSRunner(member, opts, identity, dnsServer, m)
	server.AddHealthzCheck("dns-probe", runner.Healthy)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Run(ctx) }()
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		runner.Run(ctx)
	}()
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		// The health server could not listen: without probes the kubelet
		// cannot tell this pod works, so stop and let it be restarted.
		cancel()
		<-probeDone
		return err
	}
	<-probeDone
	if err := <-serveErr; err != nil {
		return err
	}
	logger.Info("Flotilla DNS probe stopped")
	return nil
}

// newDNSRunner is the node's DNS probe, the same in the full agent and in
// `agent dns-probe`.
func newDNSRunner(member kubernetes.Interface, opts *Options, identity, server string, m *agentmetrics.Metrics) *dnsprobe.Runner {
	return dnsprobe.NewRunner(member, dnsprobe.RunnerOptions{
		Namespace: opts.LeaderElection.ResourceNamespace, NodeName: opts.NodeName, Identity: identity,
		Server: server, Name: dnsprobe.ProbeName(opts.ClusterDomain),
		Period: opts.DNSDetectPeriod, Timeout: opts.DNSProbeTimeout,
		SuccessThreshold: opts.DNSSuccessThreshold, FailureThreshold: opts.DNSFailureThreshold,
		StaleThreshold: opts.DNSStaleThreshold, Metrics: m,
	})
}
