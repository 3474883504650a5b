package app

import (
	"context"
	"fmt"
	"k8s.io/client-go/discovery"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/clusterstatus"
	"github.com/flotilla-io/flotilla/pkg/agent/dnsprobe"
	"github.com/flotilla-io/flotilla/pkg/agent/execution"
	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
	"github.com/flotilla-io/flotilla/pkg/agent/leader"
	"github.com/flotilla-io/flotilla/pkg/agent/lease"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/health"
	"github.com/flotilla-io/flotilla/pkg/healthserver"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/version"
)

// Run runs the agent until ctx is cancelled.
func Run(ctx context.Context, opts *Options) error {
	if opts.NodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name is empty and the host name is unknown: %w", err)
		}
		opts.NodeName = host
	}
	identity := leader.Identity(opts.NodeName)
	logger := klog.FromContext(ctx).WithValues("cluster", opts.ClusterName, "identity", identity)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting Flotilla agent", "version", version.String(), "node", opts.NodeName)

	memberCfg, err := cmdutil.KubeconfigFlags{Kubeconfig: opts.Kubeconfig, Context: opts.Context}.RestConfig(opts.KubeAPIQPS, opts.KubeAPIBurst, "agent")
	if err != nil {
		return fmt.Errorf("member cluster: %w", err)
	}
	hubCfg, err := cmdutil.KubeconfigFileRestConfig(opts.HubKubeconfig, opts.HubContext, opts.HubAPIQPS, opts.HubAPIBurst, "agent")
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	// The member's kubeconfig may come from KUBECONFIG or ~/.kube/config: say which server won.
	logger.Info("Clusters", "member", memberCfg.Host, "hub", hubCfg.Host)
	member, err := kubernetes.NewForConfig(memberCfg)
	if err != nil {
		return err
	}
	// The hub token renews itself: every hub client, informer and event
	// recorder below is made from hubCfg after this, so all take the token
	// the renewer holds.
	hubToken, err := newHubTokenRenewer(ctx, opts, hubCfg, member)
	if err != nil {
		return err
	}
	// Leader election gets its own client with a timeout well inside the
	// renew deadline, so a black-holed apiserver fails a renewal instead of
	// hanging it.
	electionCfg := rest.CopyConfig(memberCfg)
	electionCfg.Timeout = opts.LeaderElection.RenewDeadline / 2
	electionClient, err := kubernetes.NewForConfig(rest.AddUserAgent(electionCfg, "leader-election"))
	if err != nil {
		return err
	}
	hubKube, err := kubernetes.NewForConfig(hubCfg)
	if err != nil {
		return err
	}
	hubFlotilla, err := flotillaclient.NewForConfig(hubCfg)
	if err != nil {
		return err
	}
	memberDynamic, err := dynamic.NewForConfig(memberCfg)
	if err != nil {
		return err
	}
	memberMetadata, err := metadata.NewForConfig(memberCfg)
	if err != nil {
		return err
	}

	dnsServer := opts.DNSServer
	if dnsServer == "" && opts.DNSProbe {
		if dnsServer, err = dnsprobe.ResolverFromFile(opts.ResolvConf); err != nil {
			return fmt.Errorf("no --dns-server given: %w", err)
		}
	}
	quorum, err := dnsprobe.ParseQuorum(opts.DNSQuorum)
	if err != nil {
		return err
	}

	registry := metrics.NewRegistry("agent")
	metrics.RegisterRESTClientMetrics(registry)
	// The Work queue's depth, latency and retries (workqueue_*{name="work"}).
	metrics.RegisterWorkqueueMetrics(registry)
	m := agentmetrics.New(registry)
	server := healthserver.New(opts.HealthProbeBindAddress, opts.MetricsBindAddress, registry)
	if opts.EnableProfiling {
		server.EnableProfiling()
	}
	server.AddReadyzCheck("member-apiserver", cmdutil.APIServerReady(member.Discovery().RESTClient()))

	// With --dns-probe=false this pod's node is probed by the
	// flotilla-dns-probe DaemonSet; the leader still aggregates every verdict.
	var runner *dnsprobe.Runner
	if opts.DNSProbe {
		runner = newDNSRunner(member, opts, identity, dnsServer, m)
		server.AddHealthzCheck("dns-probe", runner.Healthy)
	}
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	server.AddHealthzCheck("leader-election", func(context.Context) error { return watchdog.Check(nil) })

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serveErr := server.Start(ctx, cancel)
	stopHubToken := startHubTokenRenewer(ctx, hubToken, hubKube, hubFlotilla, m)
	defer stopHubToken()
	if runner != nil {
		go runner.Run(ctx)
	}

	// Every pod watches the hub Lease from its start (one writer per member):
	// none takes the lead while another agent renews it, and a leader that
	// sees one steps down.
	renewInterval := time.Duration(float64(opts.ClusterLeaseDuration) * opts.ClusterLeaseRenewIntervalFraction)
	hubLeasePeriod, hubLeaseWindow := lease.DefaultObserverTiming(renewInterval)
	hubLease := lease.NewObserver(hubKube, lease.ObserverOptions{
		Cluster: opts.ClusterName, Self: identity, Period: hubLeasePeriod, Window: hubLeaseWindow, Metrics: m,
	})
	go hubLease.Run(ctx)

	lead := func(ctx context.Context) {
		memberDiscovery, err := termDiscovery(ctx, memberCfg)
		if err != nil {
			logger.Error(err, "Member discovery client")
			return
		}
		runLeader(ctx, opts, identity, member, memberDynamic, memberMetadata, memberDiscovery, hubKube, hubFlotilla, quorum, m, hubLease)
	}
	electErr := leader.Run(ctx, electionClient, leader.Options{
		LeaderElectionOptions: opts.LeaderElection, Identity: identity, Metrics: m, Watchdog: watchdog,
		Fence: hubLease.Check, FenceReady: hubLease.WaitPolled,
	}, lead)
	cancel()
	if err := <-serveErr; err != nil {
		return err
	}
	if electErr != nil {
		return electErr
	}
	logger.Info("Flotilla agent stopped")
	return nil
}

// runLeader is the hub-facing half of the agent, run only by the leader and
// stopped the moment leadership is lost (ctx).
func runLeader(ctx context.Context, opts *Options, identity string, member kubernetes.Interface, memberDynamic dynamic.Interface, memberMetadata metadata.Interface,
	memberDiscovery discovery.DiscoveryInterface, hubKube kubernetes.Interface,
	hubFlotilla flotillaclient.Interface, quorum dnsprobe.Quorum, m *agentmetrics.Metrics, hubLease *lease.Observer) {
	// Member informers: nodes and unfinished pods (stripped to what the
	// resource summary reads) and the nodes' DNS verdicts.
	factory := informers.NewSharedInformerFactoryWithOptions(member, 0,
		informers.WithTransform(stripForSummary))
	podFactory := informers.NewSharedInformerFactoryWithOptions(member, 0,
		informers.WithTransform(stripForSummary),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.AndSelectors(
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
				fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed))).String()
		}))
	verdictFactory := informers.NewSharedInformerFactoryWithOptions(member, 0,
		informers.WithNamespace(opts.LeaderElection.ResourceNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{dnsprobe.LabelVerdict: "true"}).String()
		}))
	nodes := factory.Core().V1().Nodes()
	pods := podFactory.Core().V1().Pods()
	verdicts := verdictFactory.Coordination().V1().Leases()
	synced := []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced}
	verdictsSynced := verdicts.Informer().HasSynced
	for _, f := range []informers.SharedInformerFactory{factory, podFactory, verdictFactory} {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}

	recorder, stopEvents := hubconn.NewEventRecorder(hubKube, "flotilla-agent")
	defer stopEvents()

	dnsCondition := func(now time.Time) (health.Observation, bool) {
		if !verdictsSynced() {
			return health.Observation{}, false
		}
		leases, err := verdicts.Lister().Leases(opts.LeaderElection.ResourceNamespace).List(labels.Everything())
		if err != nil {
			return health.Observation{}, false
		}
		var vs []dnsprobe.Verdict
		for _, l := range leases {
			if v, ok := dnsprobe.VerdictFromLease(l); ok {
				vs = append(vs, v)
			}
		}
		obs, summary, ok := dnsprobe.Aggregate(vs, now, quorum)
		m.DNSVerdicts.WithLabelValues("fresh").Set(float64(summary.Fresh))
		m.DNSVerdicts.WithLabelValues("failing").Set(float64(summary.Failing))
		m.DNSVerdicts.WithLabelValues("stale").Set(float64(summary.Stale))
		return obs, ok
	}

	gate := clusterstatus.NewGate()
	status := clusterstatus.NewController(hubFlotilla, member, nodes.Lister(), pods.Lister(), synced, gate, clusterstatus.Options{
		ClusterName: opts.ClusterName, Period: opts.ClusterStatusUpdateFrequency,
		SuccessThreshold: opts.ClusterSuccessThreshold, FailureThreshold: opts.ClusterFailureThreshold,
		DNS: dnsCondition, Metrics: m, Recorder: recorder,
		// A not-Ready status is written only after a fresh look at the hub
		// Lease: it must never come from an agent another has replaced.
		MayWrite: func(ctx context.Context, notReady bool) error {
			if err := leader.Check(ctx); err != nil {
				return err
			}
			if notReady {
				return hubLease.CheckFresh(ctx)
			}
			return hubLease.Check()
		},
	})
	heartbeat := lease.NewController(hubKube, lease.Options{
		Cluster: opts.ClusterName, HolderIdentity: identity, LeaseDuration: opts.ClusterLeaseDuration,
		RenewInterval: time.Duration(float64(opts.ClusterLeaseDuration) * opts.ClusterLeaseRenewIntervalFraction),
		MayRenew:      func() bool { return gate.Verified() && leader.Check(ctx) == nil }, Observer: hubLease, Metrics: m,
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		status.Run(ctx)
	}()
	// The heartbeat and the Works speak for the cluster, so they start only
	// once the agent has verified it works for this Cluster.
	if gate.Wait(ctx) == nil {
		workFactory := flotillainformers.NewSharedInformerFactoryWithOptions(hubFlotilla, 0,
			flotillainformers.WithNamespace(lease.Namespace(opts.ClusterName)), flotillainformers.WithTransform(stripManagedFields))
		works := workFactory.Work().V1alpha1().Works().Informer()
		// The hub's ResourceInterpreterCustomizations (cluster-scoped,
		// read-only): health, reflected status and retained fields of
		// customized kinds, picked up without a restart.
		ricFactory := flotillainformers.NewSharedInformerFactoryWithOptions(hubFlotilla, 0, flotillainformers.WithTransform(stripManagedFields))
		ricInformer := ricFactory.Config().V1alpha1().ResourceInterpreterCustomizations().Informer()
		interpreter := resourceinterpreter.New()
		if err := interpreter.Watch(ricInformer); err != nil {
			klog.FromContext(ctx).Error(err, "Watching ResourceInterpreterCustomizations")
		}
		ricFactory.Start(ctx.Done())
		defer ricFactory.Shutdown()
		// Wait a little for the customizations, so the first reports
		// judge customized kinds by their rules; an agent whose hub
		// identity may not read them (a hub older than its agent) goes on
		// with the built-in interpretation.
		syncCtx, cancelSync := context.WithTimeout(ctx, 10*time.Second)
		if !cache.WaitForCacheSync(syncCtx.Done(), ricInformer.HasSynced) {
			klog.FromContext(ctx).Info("ResourceInterpreterCustomizations not synced; using the built-in interpretation until they are")
		}
		cancelSync()
		execution := execution.NewController(hubFlotilla, works, memberDynamic, memberMetadata, member, memberDiscovery, execution.Options{
			Namespace: lease.Namespace(opts.ClusterName), FieldManager: opts.FieldManager, Workers: opts.ConcurrentWorkSyncs,
			OrphanGracePeriod: opts.OrphanGracePeriod, Metrics: m, Recorder: recorder, MayWrite: leader.Check,
			AgentNamespace: opts.LeaderElection.ResourceNamespace, AllowedSystemNamespaces: opts.AllowedSystemNamespaces,
			AllowFlotillaKinds: opts.AllowFlotillaKinds, Interpreter: interpreter,
		})
		workFactory.Start(ctx.Done())
		defer workFactory.Shutdown()
		executionDone := make(chan struct{})
		go func() {
			defer close(executionDone)
			execution.Run(ctx)
		}()
		heartbeat.Run(ctx)
		<-executionDone
	}
	<-done
}

// stripForSummary drops what the agent never reads from cached nodes and
// pods, so a large member costs little memory.
func stripForSummary(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		o.ManagedFields = nil
		o.Annotations = nil
		o.Labels = nil
		o.OwnerReferences = nil
		o.Spec.Volumes = nil
		stripContainers := func(cs []corev1.Container) {
			for i := range cs {
				cs[i] = corev1.Container{Name: cs[i].Name, Resources: cs[i].Resources, RestartPolicy: cs[i].RestartPolicy}
			}
		}
		stripContainers(o.Spec.Containers)
		stripContainers(o.Spec.InitContainers)
		o.Spec.EphemeralContainers = nil
		o.Status = corev1.PodStatus{Phase: o.Status.Phase, Resize: o.Status.Resize,
			ContainerStatuses: stripStatuses(o.Status.ContainerStatuses), InitContainerStatuses: stripStatuses(o.Status.InitContainerStatuses)}
	case *corev1.Node:
		o.ManagedFields = nil
		o.Annotations = nil
		o.Status.Images = nil
		o.Status.VolumesAttached = nil
		o.Status.VolumesInUse = nil
	case *coordinationv1.Lease:
		o.ManagedFields = nil
	}
	return obj, nil
}

// stripManagedFields drops metadata.managedFields from cached Works: the
// agent never reads them, and its Work writes (UpdateStatus, the finalizer's
// Update) keep the stored ones when the object sent has none.
func stripManagedFields(obj any) (any, error) {
	if w, ok := obj.(*workv1alpha1.Work); ok {
		w.ManagedFields = nil
	}
	return obj, nil
}

// stripStatuses keeps the resources the pod-request helper reads for resized pods.
func stripStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(ss))
	for _, s := range ss {
		out = append(out, corev1.ContainerStatus{Name: s.Name, Resources: s.Resources, AllocatedResources: s.AllocatedResources})
	}
	return out
}
