// Package app wires the hub binary: flags, clients, the health and metrics
// server, and leader election on the host cluster. Controllers run only while
// this replica leads.
package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusterevents"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillascheme "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/scheme"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/healthserver"
	"github.com/flotilla-io/flotilla/pkg/hub/applicationfailover"
	"github.com/flotilla-io/flotilla/pkg/hub/binding"
	"github.com/flotilla-io/flotilla/pkg/hub/bindingstatus"
	"github.com/flotilla-io/flotilla/pkg/hub/cachetransform"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterhealth"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/clustersummary"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/hub/dependencies"
	"github.com/flotilla-io/flotilla/pkg/hub/detector"
	"github.com/flotilla-io/flotilla/pkg/hub/dnsendpoint"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
	"github.com/flotilla-io/flotilla/pkg/hub/failback"
	"github.com/flotilla-io/flotilla/pkg/hub/failoverhistory"
	"github.com/flotilla-io/flotilla/pkg/hub/forbidden"
	"github.com/flotilla-io/flotilla/pkg/hub/gracefuleviction"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/hub/ingress"
	"github.com/flotilla-io/flotilla/pkg/hub/interpretercustomization"
	"github.com/flotilla-io/flotilla/pkg/hub/remedy"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
	"github.com/flotilla-io/flotilla/pkg/hub/taintmanager"
	"github.com/flotilla-io/flotilla/pkg/hub/workloadrebalancer"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/rolloutanalysis"
	"github.com/flotilla-io/flotilla/pkg/version"
)

// Options are the hub's flags. Names follow karmada-controller-manager where
// the concept is the same.
type Options struct {
	Kubeconfig             string
	Context                string
	KubeAPIQPS             float32
	KubeAPIBurst           int
	MetricsBindAddress     string
	EnableProfiling        bool
	HealthProbeBindAddress string
	LeaderElection         cmdutil.LeaderElectionOptions

	ConcurrentClusterSyncs    int
	ClusterMonitorPeriod      time.Duration
	ClusterMonitorGracePeriod time.Duration
	ClusterStartupGracePeriod time.Duration
	ClusterWorkReleaseTimeout time.Duration
	FailoverEvictionTimeout   time.Duration
	UnhealthyClusterThreshold float64
	ResourceEvictionRate      float64
	SecondaryEvictionRate     float64
	LargeFleetSizeThreshold   int

	ConcurrentResourceTemplateSyncs int
	TemplateStatusHold              time.Duration
	BindingStatusHold               time.Duration
	ConcurrentResourceBindingSyncs  int
	ConcurrentScheduleSyncs         int
	EvictionHistoryTTL              time.Duration
	AssumptionTTL                   time.Duration
	// Failover.
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	GracefulEvictionTimeout             time.Duration
	// Failback.
	FailbackTimeout                   time.Duration
	FailbackMaxConcurrentPerNamespace int
	// Traffic.
	ConcurrentMultiClusterIngressSyncs int
	DNSTrafficAddress                  string
	DNSTrafficZones                    []string
	DNSTrafficTTL                      time.Duration
	DNSTrafficMaxInFlight              int
	// DNSTrafficStaleHorizon is how long a replica keeps answering (and
	// stays ready) from its last view while the host apiserver does not
	// answer (dnstraffic.Options.StaleHorizon).
	DNSTrafficStaleHorizon time.Duration
	// RolloutPrometheusAddress is the Prometheus staged rollouts' analyses
	// query (pkg/rolloutanalysis); empty: every analysis is inconclusive.
	RolloutPrometheusAddress string
	// RolloutAnalysisTimeout bounds one analysis query.
	RolloutAnalysisTimeout time.Duration
	// RolloutDependencyMinSuccessTime is the least soak of a dependency
	// rolling in its workloads' groups.
	RolloutDependencyMinSuccessTime time.Duration
	// DNSEndpointPublishing writes an ExternalDNS DNSEndpoint per
	// MultiClusterIngress (pkg/hub/dnsendpoint).
	DNSEndpointPublishing bool
	// DNSEndpointWeightProperty is the ExternalDNS provider-specific
	// property carrying a weight (aws/weight); "" publishes no weights.
	DNSEndpointWeightProperty string
	// Webhook: the ResourceInterpreterCustomization admission webhook
	// (webhook.go).
	Webhook WebhookOptions

	// Host names. IngressHostNamespaces are the --ingress-host-namespaces
	// rules, "DOMAIN=NAMESPACE[,NAMESPACE...]" each: which namespaces may
	// claim MultiClusterIngress hosts within which domains
	// (dnstraffic.ParseDomainRules); none: any namespace, oldest first.
	IngressHostNamespaces []string
	// IngressHostSubtreeOwnership: the owner of an exact host also owns
	// the names beneath it against other namespaces (DomainRules.Subtrees).
	IngressHostSubtreeOwnership bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		// A failover is a burst of writes (a dead cluster's workloads move
		// together): at 40/s a controller client needed ~80 s to move
		// 1,000 workloads (docs/benchmarks.md). The agent uses the same.
		// Per controller client. 10,000 new templates make two writes each
		// in the detector (binding, template status) and in the binding
		// controller (Works for 2 clusters): at 100 QPS either alone took
		// 200 s (docs/benchmarks.md, issue 20).
		KubeAPIQPS:             200,
		KubeAPIBurst:           400,
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":10357",
		LeaderElection:         cmdutil.DefaultLeaderElection("flotilla-system", "flotilla-hub"),

		ConcurrentClusterSyncs:    5,
		ClusterMonitorPeriod:      5 * time.Second,
		ClusterMonitorGracePeriod: 40 * time.Second,
		ClusterStartupGracePeriod: 60 * time.Second,
		ClusterWorkReleaseTimeout: clusterlifecycle.DefaultWorkReleaseTimeout,
		FailoverEvictionTimeout:   5 * time.Minute,
		UnhealthyClusterThreshold: 0.55,
		ResourceEvictionRate:      0.5,
		SecondaryEvictionRate:     0.01,
		LargeFleetSizeThreshold:   clustertaint.DefaultLargeFleetSizeThreshold,

		ConcurrentResourceTemplateSyncs:     10,
		TemplateStatusHold:                  detector.DefaultStatusHold,
		BindingStatusHold:                   bindingstatus.DefaultHold,
		ConcurrentResourceBindingSyncs:      10,
		ConcurrentScheduleSyncs:             8,
		EvictionHistoryTTL:                  10 * time.Minute,
		AssumptionTTL:                       core.DefaultAssumptionTTL,
		DefaultNotReadyTolerationSeconds:    600,
		DefaultUnreachableTolerationSeconds: 600,
		GracefulEvictionTimeout:             10 * time.Minute,
		FailbackTimeout:                     failback.DefaultTimeout,
		FailbackMaxConcurrentPerNamespace:   failback.DefaultMaxConcurrentPerNamespace,
		ConcurrentMultiClusterIngressSyncs:  2,
		DNSTrafficTTL:                       5 * time.Second,
		DNSTrafficMaxInFlight:               1024,
		DNSTrafficStaleHorizon:              time.Hour,
		RolloutAnalysisTimeout:              10 * time.Second,
		RolloutDependencyMinSuccessTime:     30 * time.Second,
		Webhook:                             DefaultWebhookOptions(),
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	cmdutil.AddKubeconfigFlags(fs, &o.Kubeconfig, &o.Context, "the host cluster")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS to the host cluster's apiserver.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst to the host cluster's apiserver.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address serving /metrics; \"0\" disables it.")
	fs.BoolVar(&o.EnableProfiling, "profiling", o.EnableProfiling, "Serve Go's /debug/pprof/ on the metrics address (unauthenticated: keep it off where that address is reachable).")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address serving /healthz and /readyz; \"0\" disables it.")
	o.LeaderElection.AddFlags(fs, "hub replica", "host cluster")
	fs.IntVar(&o.ConcurrentClusterSyncs, "concurrent-cluster-syncs", o.ConcurrentClusterSyncs, "Clusters reconciled in parallel by each cluster controller.")
	fs.DurationVar(&o.ClusterMonitorPeriod, "cluster-monitor-period", o.ClusterMonitorPeriod, "How often the fleet guard is recomputed; the upper bound of lateness in noticing a silent cluster.")
	fs.DurationVar(&o.ClusterMonitorGracePeriod, "cluster-monitor-grace-period", o.ClusterMonitorGracePeriod, "How long a cluster's Lease may stand still before Ready turns Unknown.")
	fs.DurationVar(&o.ClusterStartupGracePeriod, "cluster-startup-grace-period", o.ClusterStartupGracePeriod, "Grace for a cluster whose agent never renewed its Lease.")
	fs.DurationVar(&o.ClusterWorkReleaseTimeout, "cluster-work-release-timeout", o.ClusterWorkReleaseTimeout,
		"How long the agent of a deleted Ready cluster has to release its Works (delete their objects on the member) before the hub removes their finalizers and leaves the objects; a cluster that is not Ready has them removed at once.")
	fs.DurationVar(&o.FailoverEvictionTimeout, "failover-eviction-timeout", o.FailoverEvictionTimeout, "How long Ready must be False or Unknown before the NoExecute taint; 0 disables NoExecute taints.")
	fs.Float64Var(&o.UnhealthyClusterThreshold, "unhealthy-cluster-threshold", o.UnhealthyClusterThreshold, "Share of not-Ready clusters of a region (with more than 2 clusters) at which the region is in a partial disruption: its clusters are evicted from at the secondary rate, or not at all at or below --large-fleet-size-threshold.")
	fs.Float64Var(&o.ResourceEvictionRate, "resource-eviction-rate", o.ResourceEvictionRate, "Clusters per second (per region) whose workloads may start to be evicted in a healthy fleet; every workload on an admitted cluster moves together.")
	fs.Float64Var(&o.SecondaryEvictionRate, "secondary-eviction-rate", o.SecondaryEvictionRate, "Clusters per second (per region) admitted for eviction while the fleet guard sees a partial disruption in the region.")
	fs.IntVar(&o.LargeFleetSizeThreshold, "large-fleet-size-threshold", o.LargeFleetSizeThreshold, "A region with at most this many clusters evicts nothing in a partial disruption instead of slowing to the secondary rate (Kubernetes' --large-cluster-size-threshold).")
	fs.IntVar(&o.ConcurrentResourceTemplateSyncs, "concurrent-resource-template-syncs", o.ConcurrentResourceTemplateSyncs, "Templates matched with policies in parallel.")
	fs.DurationVar(&o.TemplateStatusHold, "template-status-hold", o.TemplateStatusHold, "How long a template's status may lag its binding while the binding is on its way (not yet scheduled, Works not yet reported applied); a settled status is written at once. 0 writes every step.")
	fs.DurationVar(&o.BindingStatusHold, "binding-status-hold", o.BindingStatusHold, "How long a new binding's first status may wait for its agents to report (the scheduler's condition and the binding controller's status are written together once the binding settles); a settled status, and every change of a binding that already shows a status, is written at once. 0 writes every step.")
	fs.IntVar(&o.ConcurrentResourceBindingSyncs, "concurrent-resourcebinding-syncs", o.ConcurrentResourceBindingSyncs, "Bindings rendered into Works in parallel; also the workers of the taint manager, application failover, graceful eviction and dependencies controllers.")
	fs.IntVar(&o.ConcurrentScheduleSyncs, "concurrent-schedule-syncs", o.ConcurrentScheduleSyncs, "Bindings scheduled in parallel (each binding by one worker at a time).")
	fs.DurationVar(&o.EvictionHistoryTTL, "eviction-history-ttl", o.EvictionHistoryTTL, "How long the scheduler keeps a binding off a cluster it was evicted from.")
	fs.DurationVar(&o.AssumptionTTL, "assumption-ttl", o.AssumptionTTL, "Overcommit protection: how long replicas the scheduler placed on a cluster are subtracted from its room at most, waiting for the cluster to report them (Karmada's SchedulingOvercommitProtection); 0 turns the protection off.")
	fs.DurationVar(&o.FailbackTimeout, "failback-timeout", o.FailbackTimeout,
		"How long a failback may wait for its new placement to become healthy; then it is rolled back to the placement it had (Warning event FailbackRolledBack, a failover history item). 0 waits for good.")
	fs.IntVar(&o.FailbackMaxConcurrentPerNamespace, "failback-max-concurrent-per-namespace", o.FailbackMaxConcurrentPerNamespace,
		"Failbacks one namespace may have in progress at once, on top of each policy's fleet-wide maxConcurrent, so one tenant cannot take every slot. 0: no per-namespace cap.")
	fs.Int64Var(&o.DefaultNotReadyTolerationSeconds, "default-not-ready-toleration-seconds", o.DefaultNotReadyTolerationSeconds,
		"How long a workload whose placement has no toleration for the not-ready NoExecute taint stays on such a cluster.")
	fs.Int64Var(&o.DefaultUnreachableTolerationSeconds, "default-unreachable-toleration-seconds", o.DefaultUnreachableTolerationSeconds,
		"How long a workload whose placement has no toleration for the unreachable NoExecute taint stays on such a cluster.")
	fs.DurationVar(&o.GracefulEvictionTimeout, "graceful-eviction-timeout", o.GracefulEvictionTimeout,
		"How long an evicted copy is kept at most while the new placement is not healthy, for tasks that set no gracePeriodSeconds.")
	fs.IntVar(&o.ConcurrentMultiClusterIngressSyncs, "concurrent-multiclusteringress-syncs", o.ConcurrentMultiClusterIngressSyncs, "MultiClusterIngresses reconciled in parallel.")
	fs.StringVar(&o.DNSTrafficAddress, "dns-traffic-address", o.DNSTrafficAddress,
		"host:port on which the DNS traffic manager answers (UDP and TCP) for MultiClusterIngress hosts with the addresses of the clusters that get traffic; empty disables it.")
	fs.StringSliceVar(&o.DNSTrafficZones, "dns-traffic-zones", o.DNSTrafficZones,
		"Zones the DNS traffic manager is authoritative for (names outside them are REFUSED); empty makes every MultiClusterIngress host its own zone.")
	fs.DurationVar(&o.DNSTrafficTTL, "dns-traffic-ttl", o.DNSTrafficTTL, "TTL of the DNS traffic manager's answers; short, so a blocked cluster leaves resolvers' caches quickly.")
	fs.IntVar(&o.DNSTrafficMaxInFlight, "dns-traffic-max-in-flight", o.DNSTrafficMaxInFlight, "Queries the DNS traffic manager handles at once; more are dropped (clients retry).")
	fs.DurationVar(&o.DNSTrafficStaleHorizon, "dns-traffic-stale-horizon", o.DNSTrafficStaleHorizon,
		"How long a hub replica keeps answering DNS from its last view (marked stale, RFC 8914) and stays ready while the host apiserver does not answer; past it, queries get SERVFAIL so resolvers turn to another name server. At most 168h.")
	fs.BoolVar(&o.DNSEndpointPublishing, "dns-endpoint-publishing", o.DNSEndpointPublishing,
		"Publish each MultiClusterIngress's traffic as an ExternalDNS DNSEndpoint (externaldns.k8s.io/v1alpha1) of the same name and namespace, for ExternalDNS to program any DNS provider; needs the DNSEndpoint CRD (kustomize/hub-dns-endpoint). Records TTL: an ingress's spec.strategy.dnsTtlSeconds, else --dns-traffic-ttl.")
	fs.StringVar(&o.DNSEndpointWeightProperty, "dns-endpoint-weight-property", o.DNSEndpointWeightProperty,
		"With --dns-endpoint-publishing: the ExternalDNS provider-specific property that carries a record's weight, for a provider with weighted records (Route53: aws/weight). Set, a weighted host (spec.strategy.weight) gets one record set per cluster with setIdentifier=<cluster> and this property; empty, its clusters share one record set and the weights are not published (providers without weighted records, e.g. CoreDNS, rewrite set-identified records on every run).")
	fs.StringVar(&o.RolloutPrometheusAddress, "rollout-prometheus-address", o.RolloutPrometheusAddress,
		"Base URL of the Prometheus (HTTP API) that staged rollouts' analyses query, e.g. http://prometheus.monitoring:9090. Chosen by the hub's admin, never by a policy; empty: every analysis is inconclusive and pauses its rollout for a person.")
	fs.DurationVar(&o.RolloutAnalysisTimeout, "rollout-analysis-timeout", o.RolloutAnalysisTimeout,
		"How long one rollout analysis query may take; a slower one is inconclusive.")
	fs.DurationVar(&o.RolloutDependencyMinSuccessTime, "rollout-dependency-min-success-time", o.RolloutDependencyMinSuccessTime,
		"The least soak time, per cluster, of a ConfigMap or Secret that rolls out in the groups of the workloads that need it (gated by their health, which a workload reports only when it changes).")
	o.Webhook.AddFlags(fs)

	// Host names.
	fs.StringArrayVar(&o.IngressHostNamespaces, "ingress-host-namespaces", o.IngressHostNamespaces,
		"DOMAIN=NAMESPACE[,NAMESPACE...] (repeatable): only these namespaces may claim MultiClusterIngress hosts within DOMAIN (DOMAIN itself, the names under it, its wildcards); the rule of the longest matching DOMAIN applies, and an empty list reserves DOMAIN for no namespace. A claim its namespace may not make is never served and never keeps an allowed claimant from owning the host (HostsAdmitted=False, reason HostNotAllowed). Hosts no rule covers: any namespace, the oldest claimant owning the host.")
	fs.BoolVar(&o.IngressHostSubtreeOwnership, "ingress-host-subtree-ownership", o.IngressHostSubtreeOwnership,
		"The owner of an exact MultiClusterIngress host also owns every name beneath it (wildcards included) against claimants in other namespaces: such a claim loses with HostConflict naming that owner; nesting within one namespace is fine. Set it when ExternalDNS programs the CoreDNS (etcd) provider, or any provider that answers a name with the records of the names beneath it.")
}

// Validate reports every invalid flag at once.
func (o *Options) Validate() error {
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive")
	}
	if o.ConcurrentClusterSyncs < 1 || o.ClusterMonitorPeriod <= 0 || o.ClusterMonitorGracePeriod <= 0 || o.ClusterStartupGracePeriod <= 0 || o.ClusterWorkReleaseTimeout <= 0 {
		return fmt.Errorf("--concurrent-cluster-syncs, --cluster-monitor-period, the grace periods and --cluster-work-release-timeout must be positive")
	}
	if o.DefaultNotReadyTolerationSeconds < 0 || o.DefaultUnreachableTolerationSeconds < 0 || o.GracefulEvictionTimeout < 0 {
		return fmt.Errorf("--default-not-ready-toleration-seconds, --default-unreachable-toleration-seconds and --graceful-eviction-timeout must not be negative")
	}
	if o.ConcurrentResourceTemplateSyncs < 1 || o.ConcurrentResourceBindingSyncs < 1 || o.ConcurrentScheduleSyncs < 1 || o.EvictionHistoryTTL < 0 || o.AssumptionTTL < 0 {
		return fmt.Errorf("--concurrent-resource-template-syncs, --concurrent-resourcebinding-syncs and --concurrent-schedule-syncs must be positive, --eviction-history-ttl and --assumption-ttl not negative")
	}
	if o.FailbackTimeout < 0 || o.FailbackMaxConcurrentPerNamespace < 0 {
		return fmt.Errorf("--failback-timeout and --failback-max-concurrent-per-namespace must not be negative")
	}
	if o.TemplateStatusHold < 0 || o.BindingStatusHold < 0 {
		return fmt.Errorf("--template-status-hold and --binding-status-hold must not be negative")
	}
	if o.ConcurrentMultiClusterIngressSyncs < 1 || o.DNSTrafficTTL < time.Second || o.DNSTrafficMaxInFlight < 1 {
		return fmt.Errorf("--concurrent-multiclusteringress-syncs and --dns-traffic-max-in-flight must be positive, --dns-traffic-ttl at least 1s")
	}
	if o.DNSTrafficStaleHorizon <= 0 || o.DNSTrafficStaleHorizon > 7*24*time.Hour {
		return fmt.Errorf("--dns-traffic-stale-horizon must be in (0, 168h]")
	}
	if o.RolloutDependencyMinSuccessTime < 0 {
		return fmt.Errorf("--rollout-dependency-min-success-time must not be negative")
	}
	if o.RolloutAnalysisTimeout <= 0 || o.RolloutAnalysisTimeout > 5*time.Minute {
		return fmt.Errorf("--rollout-analysis-timeout must be in (0, 5m]")
	}
	if a := o.RolloutPrometheusAddress; a != "" {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--rollout-prometheus-address must be an http(s) URL with a host, e.g. http://prometheus:9090")
		}
	}
	if o.DNSEndpointWeightProperty != "" && (!o.DNSEndpointPublishing || strings.ContainsFunc(o.DNSEndpointWeightProperty, unicode.IsSpace)) {
		return fmt.Errorf("--dns-endpoint-weight-property needs --dns-endpoint-publishing and is a property name without spaces (e.g. aws/weight)")
	}
	if o.FailoverEvictionTimeout < 0 {
		return fmt.Errorf("--failover-eviction-timeout must not be negative (0 disables NoExecute taints)")
	}
	if o.UnhealthyClusterThreshold <= 0 || o.UnhealthyClusterThreshold > 1 || o.ResourceEvictionRate < 0 || o.SecondaryEvictionRate < 0 || o.LargeFleetSizeThreshold < 0 {
		return fmt.Errorf("--unhealthy-cluster-threshold must be in (0, 1], eviction rates and --large-fleet-size-threshold must not be negative")
	}
	if _, err := dnstraffic.ParseDomainRules(o.IngressHostNamespaces); err != nil {
		return fmt.Errorf("--ingress-host-namespaces: %w", err)
	}
	if err := o.Webhook.Validate(); err != nil {
		return err
	}
	return o.LeaderElection.Validate()
}

// NewHubCommand is the `hub` command.
func NewHubCommand() *cobra.Command {
	opts := NewOptions()
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Flotilla hub: watches member Leases, taints, schedules and fails workloads over.",
		Long: `The Flotilla hub runs on an existing host cluster. Its only store is the host
apiserver (Flotilla CRDs); members reach it through their agents (pull mode).`,
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
	cmd.AddCommand(newAgentKubeconfigCommand())
	cmd.AddCommand(newWrapCommand())
	return cmd
}

// Run runs the hub until ctx is cancelled.
func Run(ctx context.Context, opts *Options) error {
	klog.InfoS("Starting Flotilla hub", "version", version.String())
	cfg, err := cmdutil.KubeconfigFlags{Kubeconfig: opts.Kubeconfig, Context: opts.Context}.RestConfig(opts.KubeAPIQPS, opts.KubeAPIBurst, "hub")
	if err != nil {
		return err
	}
	// The kubeconfig may come from KUBECONFIG or ~/.kube/config: say which server won.
	klog.InfoS("Host cluster", "server", cfg.Host)
	registry := metrics.NewRegistry("hub")
	metrics.RegisterRESTClientMetrics(registry)
	// Every controller queue's depth, adds, latency and retries: whether the
	// hub has caught up is workqueue_depth at 0 (docs/metrics.md).
	metrics.RegisterWorkqueueMetrics(registry)
	hubMetrics := hubmetrics.New(registry)
	clients := &clientBuilder{cfg: cfg, requests: metrics.NewAPIRequestCounter(registry), forbidden: hubMetrics.ForbiddenWrites}
	// Each controller gets a client of its own (metrics.ClientConfig). The
	// first one proves the configuration; the rest cannot fail after it.
	kube, err := kubernetes.NewForConfig(clients.config("hub"))
	if err != nil {
		return err
	}
	historyMetrics := failoverhistory.NewMetrics(registry)
	failbackMetrics := failback.NewMetrics(registry)
	health := healthserver.New(opts.HealthProbeBindAddress, opts.MetricsBindAddress, registry)
	if opts.EnableProfiling {
		health.EnableProfiling()
	}
	// What a replica serves (DNS answers, webhook reviews, metrics) needs
	// the host apiserver only to start: once ready, a replica stays ready
	// through an outage of it for the stale horizon, not to lose its DNS
	// Service endpoints for nothing.
	hostCheck := func(check healthserver.Check) healthserver.Check {
		return healthserver.RideOut(ctx, check, opts.DNSTrafficStaleHorizon, 5*time.Second, time.Now)
	}
	health.AddReadyzCheck("host-apiserver", hostCheck(cmdutil.APIServerReady(kube.Discovery().RESTClient())))
	health.AddReadyzCheck("flotilla-crds", hostCheck(cmdutil.APIGroupsServed(kube.Discovery(), cmdutil.FlotillaGroupVersions...)))
	var dnsEndpointMetrics *dnsendpoint.Metrics
	if opts.DNSEndpointPublishing {
		health.AddReadyzCheck("dns-endpoint-crd", hostCheck(cmdutil.APIGroupsServed(kube.Discovery(), dnsendpoint.GVR.GroupVersion().String())))
		dnsEndpointMetrics = dnsendpoint.NewMetrics(registry)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveErr := health.Start(ctx, cancel)

	// The admission webhook serves on every replica, leader or not, so
	// that writing a customization never waits for an election.
	webhookErr, err := startWebhook(ctx, cancel, opts.Webhook, clients, health, registry)
	if err != nil {
		return err
	}

	// The DNS traffic manager only reads MultiClusterIngress status, so it
	// serves on every replica, leader or not: all answer the same.
	dnsErr := make(chan error, 1)
	hostNamespaces, err := dnstraffic.ParseDomainRules(opts.IngressHostNamespaces)
	if err != nil {
		return fmt.Errorf("--ingress-host-namespaces: %w", err)
	}
	hostNamespaces.Subtrees = opts.IngressHostSubtreeOwnership
	if opts.DNSTrafficAddress != "" {
		dnsClient := clients.flotilla("dns-traffic")
		dnsFactory := flotillainformers.NewSharedInformerFactory(dnsClient, 0)
		// Freshness: a quorum LIST of one MCI, with the informer's client
		// and permission; while it fails the informer's view is stale.
		fresh := func(ctx context.Context) error {
			_, err := dnsClient.NetworkingV1alpha1().MultiClusterIngresses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}
		dnsServer, err := dnstraffic.New(dnstraffic.Options{Address: opts.DNSTrafficAddress, Zones: opts.DNSTrafficZones,
			TTL: opts.DNSTrafficTTL, MaxInFlight: opts.DNSTrafficMaxInFlight, HostNamespaces: hostNamespaces, Metrics: dnstraffic.NewMetrics(registry),
			FreshnessCheck: fresh, StaleHorizon: opts.DNSTrafficStaleHorizon},
			dnsFactory.Networking().V1alpha1().MultiClusterIngresses().Informer())
		if err != nil {
			return fmt.Errorf("--dns-traffic-*: %w", err)
		}
		health.AddReadyzCheck("dns-traffic", func(context.Context) error { return dnsServer.Ready() })
		dnsFactory.Start(ctx.Done())
		defer dnsFactory.Shutdown()
		go func() {
			if err := dnsServer.Run(ctx); err != nil {
				dnsErr <- err
				cancel()
			}
		}()
	}

	runControllers := func(ctx context.Context) {
		klog.InfoS("Hub controllers running")
		hubMetrics.Leader.Set(1)
		defer hubMetrics.Leader.Set(0)
		// Every cached object is trimmed first (cachetransform): at 10,000
		// templates the cache is most of the hub's memory.
		factory, kubeFactory := newInformerFactories(clients, cachetransform.Compact)
		broadcaster := record.NewBroadcaster()
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.kube("events").CoreV1().Events("")})
		defer broadcaster.Shutdown()
		// Events about a Cluster go to its namespace flotilla-es-<cluster>,
		// not to the shared "default" (clusterevents).
		recorder := clusterevents.Recorder(broadcaster.NewRecorder(flotillascheme.Scheme, corev1.EventSource{Component: "flotilla-hub"}))
		clusters := factory.Cluster().V1alpha1().Clusters().Informer()
		lifecycle := clusterlifecycle.NewController(clients.kube("cluster-lifecycle"), clients.flotilla("cluster-lifecycle"), clusters, kubeFactory,
			clusterlifecycle.Options{Recorder: recorder, Metrics: hubMetrics, WorkReleaseTimeout: opts.ClusterWorkReleaseTimeout})
		health := clusterhealth.NewController(clients.flotilla("cluster-health"), clusters, kubeFactory.Coordination().V1().Leases().Informer(), clusterhealth.Options{
			MonitorPeriod: opts.ClusterMonitorPeriod, GracePeriod: opts.ClusterMonitorGracePeriod,
			StartupGracePeriod: opts.ClusterStartupGracePeriod, Metrics: hubMetrics, Recorder: recorder,
		})
		// Says on a Cluster when the scheduler ignores its resource summary.
		summaries := clustersummary.NewController(clients.flotilla("cluster-summary"), clusters, recorder)
		guard := clustertaint.NewFleetGuard(opts.UnhealthyClusterThreshold, opts.ResourceEvictionRate, opts.SecondaryEvictionRate).
			WithLargeFleetSizeThreshold(opts.LargeFleetSizeThreshold)
		// When taints written without timeAdded were first seen: the
		// cluster taint controller stamps it, the taint manager counts
		// from it before the stamp lands.
		taintClock := clustertaint.NewTaintClock(nil)
		taints := clustertaint.NewController(clients.flotilla("cluster-taint"), clusters, factory.Cluster().V1alpha1().ClusterTaintPolicies().Informer(), guard, clustertaint.Options{
			FailoverEvictionTimeout: opts.FailoverEvictionTimeout, GuardPeriod: opts.ClusterMonitorPeriod, Metrics: hubMetrics, Recorder: recorder,
			GuardPublisher: clustertaint.NewGuardPublisher(clients.kube("fleet-guard"), opts.LeaderElection.ResourceNamespace),
			TaintClock:     taintClock,
		})
		// A binding status write the apiserver refuses for want of a
		// permission is said on the binding's template (the binding's own
		// status is what cannot be written).
		statusDenials := forbidden.NewDenials()
		// The detector re-checks each template's scope against the host's
		// discovery (cached; refreshed at most once a minute on a miss).
		// ResourceInterpreterCustomizations: read by every controller that
		// interprets objects, changes picked up without a restart; the
		// interpreter-customization controller says on each whether it
		// compiled.
		ricInformer := factory.Config().V1alpha1().ResourceInterpreterCustomizations().Informer()
		interpreter := resourceinterpreter.New()
		if err := interpreter.Watch(ricInformer); err != nil {
			klog.ErrorS(err, "Watching ResourceInterpreterCustomizations")
		}
		ricCtl := interpretercustomization.NewController(clients.flotilla("interpreter-customization"), ricInformer, recorder)
		detectorCtl := detector.NewController(clients.flotilla("detector"), factory, recorder,
			detector.HostScope(memory.NewMemCacheClient(clients.kube("detector").Discovery()), clock.RealClock{}, time.Minute)).
			WithStatusHold(opts.TemplateStatusHold).WithBindingStatusDenials(statusDenials).WithPreemptionMetric(hubMetrics.PolicyPreemptions).
			WithInterpreter(interpreter)
		// PriorityClasses (spec.schedulePriority): few and cluster-scoped,
		// so not label-selected like kubeFactory's objects.
		priorityFactory := informers.NewSharedInformerFactoryWithOptions(clients.kube("priority-classes"), 0, informers.WithTransform(cachetransform.Compact))
		detectorCtl.WithPriorityClasses(priorityFactory.Scheduling().V1().PriorityClasses().Informer())
		// propagateDeps: the same scope check as the detector's, so a
		// dependency is never an object the detector would refuse.
		dependenciesCtl := dependencies.NewController(clients.flotilla("dependencies"), factory, dependencies.Options{Recorder: recorder, Interpreter: interpreter,
			Scope: dependencies.ScopeFunc(detector.HostScope(memory.NewMemCacheClient(clients.kube("dependencies").Discovery()), clock.RealClock{}, time.Minute))})
		// One writer of the status the scheduler and the binding controller
		// share: a new binding's first status is one write.
		bindingStatuses := bindingstatus.NewWriter(clients.flotilla("binding-status"), factory, opts.BindingStatusHold, clock.RealClock{}).
			WithRecorder(recorder).WithDenials(statusDenials)
		schedulerCtl := scheduler.NewController(clients.flotilla("scheduler"), factory, scheduler.Options{
			EvictionHistoryTTL: opts.EvictionHistoryTTL, Metrics: hubMetrics, Recorder: recorder, Statuses: bindingStatuses,
			AssumptionTTL: schedulerAssumptionTTL(opts.AssumptionTTL)})
		// Template revisions live in the hub's own namespace, where tenants
		// cannot write; a staged rollout holds while the fleet guard sees
		// fleet-wide disruption (one budget for changes and failures).
		revisions := binding.NewRevisions(clients.kube("binding-revisions"), opts.LeaderElection.ResourceNamespace)
		var enqueueBinding func(string)
		analyses := rolloutanalysis.NewRunner(rolloutanalysis.Options{Address: opts.RolloutPrometheusAddress, Timeout: opts.RolloutAnalysisTimeout,
			Registerer: registry, OnChange: func(key string) {
				if enqueueBinding != nil {
					enqueueBinding(key)
				}
			}})
		bindingCtl := binding.NewController(clients.flotilla("binding"), factory, binding.Options{Metrics: hubMetrics, Recorder: recorder,
			Statuses: bindingStatuses, Interpreter: interpreter, Revisions: revisions, Hold: rolloutHold(guard), Analyzer: analysisOf(analyses),
			DependencyMinSuccessTime: opts.RolloutDependencyMinSuccessTime})
		enqueueBinding = bindingCtl.EnqueueAnalysis
		taintManager := taintmanager.NewController(clients.flotilla("taint-manager"), factory, taintmanager.Options{
			Defaults: taintmanager.Defaults{NotReadyTolerationSeconds: opts.DefaultNotReadyTolerationSeconds,
				UnreachableTolerationSeconds: opts.DefaultUnreachableTolerationSeconds},
			Guard: guard, Metrics: hubMetrics, Recorder: recorder, TaintClock: taintClock})
		appFailover := applicationfailover.NewController(clients.flotilla("application-failover"), factory, applicationfailover.Options{
			Guard: guard, EvictionHistoryTTL: opts.EvictionHistoryTTL, Metrics: hubMetrics, Recorder: recorder})
		evictionCtl := gracefuleviction.NewController(clients.flotilla("graceful-eviction"), factory, gracefuleviction.Options{
			GracefulEvictionTimeout: opts.GracefulEvictionTimeout, Metrics: hubMetrics, Recorder: recorder})
		historyCtl := failoverhistory.NewController(clients.flotilla("failover-history"), factory, failoverhistory.Options{
			Metrics: historyMetrics, Recorder: recorder})
		failbackCtl := failback.NewController(clients.flotilla("failback"), factory, failback.Options{
			Guard: guard, Metrics: failbackMetrics, Recorder: recorder, EvictionHistoryTTL: opts.EvictionHistoryTTL,
			Timeout: opts.FailbackTimeout, MaxConcurrentPerNamespace: opts.FailbackMaxConcurrentPerNamespace})
		rebalancerCtl := workloadrebalancer.NewController(clients.flotilla("workload-rebalancer"), factory, workloadrebalancer.Options{Recorder: recorder})
		remedyCtl := remedy.NewController(clients.flotilla("remedy"), factory, remedy.Options{Metrics: hubMetrics, Recorder: recorder})
		ingressCtl := ingress.NewController(clients.flotilla("multicluster-ingress"), factory, ingress.Options{Metrics: hubMetrics, Recorder: recorder,
			HostNamespaces: hostNamespaces})
		// Publishing DNSEndpoints reads the ingresses' status (the traffic
		// decision) and the clusters, judged as the fleet guard does, to
		// keep the last records while the hub sees no cluster Ready.
		var dnsEndpointCtl *dnsendpoint.Controller
		if opts.DNSEndpointPublishing {
			dnsEndpointCtl = dnsendpoint.NewController(dynamic.NewForConfigOrDie(clients.config("dns-endpoint")), factory, dnsendpoint.Options{
				TTL: opts.DNSTrafficTTL, WeightProperty: opts.DNSEndpointWeightProperty, HostNamespaces: hostNamespaces, Recorder: recorder, Metrics: dnsEndpointMetrics})
		}
		factory.Start(ctx.Done())
		kubeFactory.Start(ctx.Done())
		priorityFactory.Start(ctx.Done())
		defer priorityFactory.Shutdown()
		revisions.Start(ctx)
		go analyses.Run(ctx)
		defer factory.Shutdown()
		defer kubeFactory.Shutdown()
		var wg sync.WaitGroup
		type controller struct {
			run     func(context.Context, int)
			workers int
		}
		controllers := []controller{
			{lifecycle.Run, opts.ConcurrentClusterSyncs}, {health.Run, opts.ConcurrentClusterSyncs}, {taints.Run, opts.ConcurrentClusterSyncs},
			{summaries.Run, 1},
			{detectorCtl.Run, opts.ConcurrentResourceTemplateSyncs},
			// Decisions are independent per binding (none reserves capacity
			// for another), and a decision is ~50µs: the workers exist to
			// overlap the two API writes each schedule makes.
			{schedulerCtl.Run, opts.ConcurrentScheduleSyncs},
			{bindingCtl.Run, opts.ConcurrentResourceBindingSyncs}, {dependenciesCtl.Run, opts.ConcurrentResourceBindingSyncs},
			{func(ctx context.Context, _ int) { bindingStatuses.Run(ctx) }, 1},
			// Evictions are binding updates, one per binding; a dead
			// cluster's workloads are admitted together and must not
			// queue behind one worker.
			{taintManager.Run, opts.ConcurrentResourceBindingSyncs}, {appFailover.Run, opts.ConcurrentResourceBindingSyncs},
			{evictionCtl.Run, opts.ConcurrentResourceBindingSyncs}, {historyCtl.Run, opts.ConcurrentResourceBindingSyncs},
			// Failbacks are rare and counted fleet-wide: one worker.
			{failbackCtl.Run, 1},
			// WorkloadRebalancers are one-shot and rare: one worker.
			{rebalancerCtl.Run, 1},
			// Customizations are few and admin-written: one worker.
			{ricCtl.Run, 1},
			{remedyCtl.Run, opts.ConcurrentClusterSyncs}, {ingressCtl.Run, opts.ConcurrentMultiClusterIngressSyncs},
		}
		if dnsEndpointCtl != nil {
			controllers = append(controllers, controller{dnsEndpointCtl.Run, opts.ConcurrentMultiClusterIngressSyncs})
		}
		for _, ctl := range controllers {
			wg.Add(1)
			go func() { defer wg.Done(); ctl.run(ctx, ctl.workers) }()
		}
		wg.Wait()
	}

	if !opts.LeaderElection.LeaderElect {
		runControllers(ctx)
	} else if err := runLeaderElectedWith(ctx, clients, opts.LeaderElection, hubMetrics.LeadershipLost, runControllers); err != nil {
		cancel()
		return err
	}
	cancel()
	select {
	case err := <-dnsErr:
		return err
	case err := <-webhookErr:
		return err
	default:
	}
	if err := <-serveErr; err != nil {
		return err
	}
	klog.InfoS("Flotilla hub stopped")
	return nil
}

// controllersStopTimeout bounds how long a replica that lost the hub Lease
// waits for its controllers to return before it exits instead: it must never
// campaign, and so perhaps lead again, with the last term's still running.
const controllersStopTimeout = time.Minute

// runLeaderElected runs fn for every term this replica holds the hub Lease,
// and campaigns again after losing it, until ctx ends. Losing the Lease (the
// host apiserver unreachable for the renew deadline, or another replica
// holding it) stops the decisions, not the process: fn's context is
// cancelled and fn waited for before the next campaign, so two terms never
// overlap in one process, while the DNS traffic manager and the webhook go on
// serving. fn still running controllersStopTimeout after a loss is an error,
// for a restart to end it.
func runLeaderElected(ctx context.Context, kube kubernetes.Interface, le cmdutil.LeaderElectionOptions, lost prometheus.Counter, fn func(context.Context)) error {
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	id = fmt.Sprintf("%s_%d", id, os.Getpid())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.ResourceNamespace, le.ResourceName,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		var (
			mu      sync.Mutex
			over    bool
			running sync.WaitGroup
			led     bool
			done    = make(chan struct{})
		)
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            "flotilla-hub",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(termCtx context.Context) {
					mu.Lock()
					if over || termCtx.Err() != nil { // the term ended before this goroutine ran
						mu.Unlock()
						return
					}
					running.Add(1)
					led = true
					mu.Unlock()
					defer running.Done()
					fn(termCtx)
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(identity string) {
					klog.InfoS("Hub leader", "identity", identity)
				},
			},
		})
		if err != nil {
			return err
		}
		elector.Run(ctx)
		mu.Lock()
		over = true
		wasLeader := led
		mu.Unlock()
		go func() { running.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(controllersStopTimeout):
			return fmt.Errorf("lost the hub leader-election lease %s/%s and the controllers did not stop within %v", le.ResourceNamespace, le.ResourceName, controllersStopTimeout)
		}
		if ctx.Err() != nil {
			return nil
		}
		if wasLeader {
			lost.Inc()
			klog.InfoS("Lost the hub leader-election lease: controllers stopped; DNS and the webhook go on serving; campaigning again",
				"lease", klog.KRef(le.ResourceNamespace, le.ResourceName))
		}
	}
	return nil
}

// clientBuilder makes the hub's clients, one per controller.
type clientBuilder struct {
	cfg      *rest.Config
	requests *prometheus.CounterVec
	// forbidden counts the writes the apiserver refuses for want of a
	// permission, whichever controller makes them (nil: not counted).
	forbidden *prometheus.CounterVec
}

// config is the configuration of the client called name.
func (b *clientBuilder) config(name string) *rest.Config {
	cfg := metrics.ClientConfig(b.cfg, name, b.requests)
	if b.forbidden != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return forbidden.Transport(rt, b.forbidden) })
	}
	return cfg
}

func (b *clientBuilder) kube(name string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(b.config(name))
}

func (b *clientBuilder) flotilla(name string) flotillaclient.Interface {
	return flotillaclient.NewForConfigOrDie(b.config(name))
}

// runLeaderElectedWith runs the election on a client of its own, so that
// controllers' requests can never delay a renewal.
func runLeaderElectedWith(ctx context.Context, clients *clientBuilder, le cmdutil.LeaderElectionOptions, lost prometheus.Counter, fn func(context.Context)) error {
	return runLeaderElected(ctx, clients.kube("leader-election"), le, lost, fn)
}

// rolloutHold is the fleet guard's word on staged rollouts: none starts
// updating a cluster before the guard has judged the fleet, nor while it
// sees a partial or full disruption.
func rolloutHold(guard *clustertaint.FleetGuard) func() string {
	return func() string {
		st := guard.State()
		switch {
		case !st.Evaluated:
			return "the fleet guard has not judged the fleet yet"
		case st.Mode != clustertaint.GuardNormal:
			return fmt.Sprintf("the fleet guard sees %s (%d of %d clusters not Ready)", st.Mode, st.NotReady, st.Total)
		}
		return ""
	}
}

// analysisOf runs a rollout group's analysis with the runner; an analysis
// that does not validate pauses its rollout with the reason.
func analysisOf(r *rolloutanalysis.Runner) binding.Analyzer {
	return func(key string, spec policyv1alpha1.RolloutAnalysis, group string, clusters []string) workv1alpha1.AnalysisStatus {
		if err := rolloutanalysis.Validate(spec); err != nil {
			return workv1alpha1.AnalysisStatus{Group: group, Phase: workv1alpha1.AnalysisInconclusive, Message: "the analysis is invalid: " + err.Error()}
		}
		return r.Observe(key, spec, group, clusters)
	}
}

// schedulerAssumptionTTL is the scheduler's AssumptionTTL for the flag:
// the flag's 0 (off) is the scheduler's negative.
func schedulerAssumptionTTL(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}
