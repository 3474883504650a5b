// Package app wires the agent binary: flags, the member and hub clients, and
// the health and metrics server. The agent runs in its member cluster and
// dials out to the hub (pull mode); the hub never holds member credentials.
package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	"github.com/flotilla-io/flotilla/pkg/healthserver"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/version"
)

// Options are the agent's flags. Names follow karmada-agent where the concept
// is the same (--karmada-kubeconfig becomes --hub-kubeconfig).
type Options struct {
	ClusterName            string
	Kubeconfig             string
	HubKubeconfig          string
	KubeAPIQPS             float32
	KubeAPIBurst           int
	HubAPIQPS              float32
	HubAPIBurst            int
	MetricsBindAddress     string
	HealthProbeBindAddress string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		KubeAPIQPS:             40,
		KubeAPIBurst:           60,
		HubAPIQPS:              40,
		HubAPIBurst:            60,
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":10357",
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "Name of the Cluster object on the hub this agent works for (required).")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to the member cluster's kubeconfig; empty means the in-cluster service account.")
	fs.StringVar(&o.HubKubeconfig, "hub-kubeconfig", o.HubKubeconfig, "Path to the kubeconfig of the agent's own identity on the hub (required).")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS to the member cluster's apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst to the member cluster's apiserver.")
	fs.Float32Var(&o.HubAPIQPS, "hub-api-qps", o.HubAPIQPS, "QPS to the hub's apiserver.")
	fs.IntVar(&o.HubAPIBurst, "hub-api-burst", o.HubAPIBurst, "Burst to the hub's apiserver.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address serving /metrics; \"0\" disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address serving /healthz and /readyz; \"0\" disables it.")
}

// Validate reports invalid flags.
func (o *Options) Validate() error {
	if o.ClusterName == "" {
		return fmt.Errorf("--cluster-name is required")
	}
	if o.HubKubeconfig == "" {
		return fmt.Errorf("--hub-kubeconfig is required")
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 || o.HubAPIQPS <= 0 || o.HubAPIBurst <= 0 {
		return fmt.Errorf("QPS and burst flags must be positive")
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
	return cmd
}

// Run runs the agent until ctx is cancelled.
func Run(ctx context.Context, opts *Options) error {
	klog.InfoS("Starting Flotilla agent", "cluster", opts.ClusterName, "version", version.String())
	memberCfg, err := cmdutil.RestConfig(opts.Kubeconfig, opts.KubeAPIQPS, opts.KubeAPIBurst, "agent")
	if err != nil {
		return fmt.Errorf("member cluster: %w", err)
	}
	hubCfg, err := cmdutil.RestConfig(opts.HubKubeconfig, opts.HubAPIQPS, opts.HubAPIBurst, "agent")
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	member, err := kubernetes.NewForConfig(memberCfg)
	if err != nil {
		return err
	}
	hub, err := kubernetes.NewForConfig(hubCfg)
	if err != nil {
		return err
	}

	health := healthserver.New(opts.HealthProbeBindAddress, opts.MetricsBindAddress, metrics.NewRegistry("agent"))
	health.AddReadyzCheck("member-apiserver", cmdutil.APIServerReady(member.Discovery().RESTClient()))
	health.AddReadyzCheck("hub-apiserver", cmdutil.APIServerReady(hub.Discovery().RESTClient()))

	if err := health.Run(ctx); err != nil {
		return err
	}
	klog.InfoS("Flotilla agent stopped", "cluster", opts.ClusterName)
	return nil
}
