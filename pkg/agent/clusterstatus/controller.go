package clusterstatus

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/health"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// The Cluster CRD's bounds on status.kubernetesVersion and on a condition
// message: the DNS condition quotes node names the probe pods wrote, and a
// message over the bound would have every status write refused.
const (
	maxKubernetesVersion = 128
	maxConditionMessage  = 4096
)

// Event reasons on the Cluster.
const (
	EventClusterIDSet         = "ClusterIDSet"
	EventClusterIDMismatch    = "ClusterIDMismatch"
	EventDNSResolutionReady   = "ServiceDomainNameResolutionReady"
	EventDNSResolutionFailing = "ServiceDomainNameResolutionFailed"
)

// hubRequestTimeout bounds one request to the hub.
const hubRequestTimeout = 10 * time.Second

// Gate records whether the agent has verified that it works for its Cluster
// (spec.id matches this member). Hub-facing work that speaks for the
// cluster (the Lease heartbeat) waits for it.
type Gate struct {
	mu       sync.Mutex
	verified bool
	ch       chan struct{} // closed while verified
}

// NewGate returns an unverified gate.
func NewGate() *Gate { return &Gate{ch: make(chan struct{})} }

// Set records the latest verification result.
func (g *Gate) Set(verified bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if verified == g.verified {
		return
	}
	g.verified = verified
	if verified {
		close(g.ch)
	} else {
		g.ch = make(chan struct{})
	}
}

// Verified reports the latest verification result.
func (g *Gate) Verified() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.verified
}

// Wait blocks until the gate is verified or ctx is done.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Options configure a Controller.
type Options struct {
	ClusterName string
	// Period is --cluster-status-update-frequency.
	Period time.Duration
	// SuccessThreshold and FailureThreshold damp the Ready condition.
	SuccessThreshold, FailureThreshold time.Duration
	// DNS, when set, returns the aggregated DNS condition; ok=false leaves
	// the condition as it is.
	DNS     func(now time.Time) (obs health.Observation, ok bool)
	Clock   clock.WithTicker
	Metrics *agentmetrics.Metrics
	// Recorder records events on the Cluster (in the cluster's hub namespace).
	Recorder record.EventRecorder
	// MayWrite, when set, is asked right before each write to the Cluster;
	// an error skips the write (another agent speaks for the cluster).
	// notReady is true for a status whose Ready is not True, which must not
	// rest on a cached view.
	MayWrite func(ctx context.Context, notReady bool) error
}

// Controller keeps the Cluster's status on the hub true to the member. The
// agent leader runs one.
type Controller struct {
	opts    Options
	hub     flotillaclient.Interface
	member  kubernetes.Interface
	nodes   corelisters.NodeLister
	pods    corelisters.PodLister
	synced  []cache.InformerSynced
	gate    *Gate
	tracker *health.ThresholdTracker

	getTracker, writeTracker *hubconn.Tracker
	clusterID                string // kube-system namespace UID, once known
	identityProblem          string // last identity complaint, for once-per-change events
	fenced                   string // last MayWrite refusal, to log once per change
	// apiCache skips the full discovery while the member's discovery
	// documents keep their ETags; versionCache skips /version while
	// nothing suggests a new apiserver.
	apiCache     apiCache
	versionCache versionCache
}

// NewController returns a Controller. nodes and pods are listers of started
// member informers whose HasSynced funcs are in synced.
func NewController(hub flotillaclient.Interface, member kubernetes.Interface, nodes corelisters.NodeLister,
	pods corelisters.PodLister, synced []cache.InformerSynced, gate *Gate, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{
		opts: opts, hub: hub, member: member, nodes: nodes, pods: pods, synced: synced, gate: gate,
		tracker:      health.NewThresholdTracker(opts.Clock, opts.SuccessThreshold, opts.FailureThreshold),
		getTracker:   hubconn.NewTracker("get-cluster", opts.Metrics),
		writeTracker: hubconn.NewTracker("update-cluster", opts.Metrics),
	}
}

// Run syncs every Period until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("cluster", c.opts.ClusterName)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Reporting cluster status", "period", c.opts.Period,
		"failureThreshold", c.opts.FailureThreshold, "successThreshold", c.opts.SuccessThreshold)
	ticker := c.opts.Clock.NewTicker(c.opts.Period)
	defer ticker.Stop()
	for {
		c.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Sync runs one round: verify identity, probe, write the status if it changed.
func (c *Controller) Sync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if ctx.Err() != nil {
		return
	}
	ready := c.probe(ctx)
	if ctx.Err() != nil {
		return
	}
	if ready.Status != metav1.ConditionTrue {
		c.versionCache.stale = true
	}

	getCtx, cancel := context.WithTimeout(ctx, hubRequestTimeout)
	cluster, err := c.hub.ClusterV1alpha1().Clusters().Get(getCtx, c.opts.ClusterName, metav1.GetOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		c.gate.Set(false)
		err = fmt.Errorf("cluster %q not found on the hub; register it (kubectl apply a Cluster) and the agent will pick it up: %w", c.opts.ClusterName, err)
	}
	if c.getTracker.Observe(logger, err) != "" {
		return
	}
	if !c.verifyIdentity(ctx, cluster) {
		return
	}
	c.seedTracker(cluster)
	c.write(ctx, cluster, ready)
}

// probe runs the apiserver probe and returns the damped observation.
func (c *Controller) probe(ctx context.Context) health.Observation {
	timeout := min(c.opts.Period, 5*time.Second)
	probeCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := c.opts.Clock.Now()
	obs := ProbeAPIServer(probeCtx, c.member.Discovery().RESTClient())
	if m := c.opts.Metrics; m != nil {
		m.ProbeDuration.WithLabelValues(agentmetrics.ProbeAPIServer).Observe(c.opts.Clock.Since(start).Seconds())
		m.ProbeResults.WithLabelValues(agentmetrics.ProbeAPIServer, string(obs.Status), obs.Reason).Inc()
	}
	return obs
}

// seedTracker starts damping from the Ready condition a previous leader
// wrote, so a leader change does not make the first probe decisive.
func (c *Controller) seedTracker(cluster *clusterv1alpha1.Cluster) {
	if _, ok := c.tracker.Current(); ok {
		return
	}
	cond := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if cond == nil {
		return
	}
	switch {
	case cond.Reason == clusterv1alpha1.ClusterReasonReady, cond.Reason == clusterv1alpha1.ClusterReasonNotReady,
		cond.Reason == clusterv1alpha1.ClusterReasonNotReachable,
		// The hub's Unknown (no agent renewed the Lease, e.g. through a
		// member-wide outage in which nobody could lead): True again only
		// after the success threshold, as from False.
		cond.Status == metav1.ConditionUnknown:
		c.tracker.Seed(health.Observation{Status: cond.Status, Reason: cond.Reason, Message: cond.Message})
	}
}

// mayWrite asks Options.MayWrite, logging a refusal once per change.
func (c *Controller) mayWrite(ctx context.Context, notReady bool) bool {
	if c.opts.MayWrite == nil {
		return true
	}
	err := c.opts.MayWrite(ctx, notReady)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != c.fenced && err != nil {
		klog.FromContext(ctx).Info("Not writing the Cluster", "reason", err)
	}
	c.fenced = msg
	return err == nil
}

// verifyIdentity checks spec.id against this member's kube-system UID,
// setting it when empty. It returns whether the agent may speak for cluster.
func (c *Controller) verifyIdentity(ctx context.Context, cluster *clusterv1alpha1.Cluster) bool {
	logger := klog.FromContext(ctx)
	if c.clusterID == "" {
		idCtx, cancel := context.WithTimeout(ctx, hubRequestTimeout)
		ns, err := c.member.CoreV1().Namespaces().Get(idCtx, metav1.NamespaceSystem, metav1.GetOptions{})
		cancel()
		if err != nil {
			// Unknown identity: keep the gate as it is (a member outage at
			// leader start must not look like a mismatch) and retry.
			c.complain(logger, cluster, "", fmt.Sprintf("cannot read the member's kube-system namespace to verify identity: %v", err))
			return false
		}
		c.clusterID = string(ns.UID)
	}
	switch cluster.Spec.ID {
	case c.clusterID:
		c.complain(logger, cluster, "", "")
		c.gate.Set(true)
		return true
	case "":
		if !c.mayWrite(ctx, false) {
			return false
		}
		updated := cluster.DeepCopy()
		updated.Spec.ID = c.clusterID
		wctx, cancel := context.WithTimeout(ctx, hubRequestTimeout)
		_, err := c.hub.ClusterV1alpha1().Clusters().Update(wctx, updated, metav1.UpdateOptions{})
		cancel()
		c.countWrite(err)
		if c.writeTracker.Observe(logger, err) != "" {
			return false
		}
		logger.Info("Set the Cluster's spec.id to this member's kube-system UID", "id", c.clusterID)
		c.event(cluster, corev1.EventTypeNormal, EventClusterIDSet, "spec.id set to member kube-system UID %s", c.clusterID)
		c.gate.Set(true)
		return false // the status is written next round, against the new object
	default:
		c.gate.Set(false)
		msg := fmt.Sprintf("refusing to act for Cluster %q: its spec.id %s is not this member's kube-system UID %s "+
			"(is --cluster-name or the hub kubeconfig meant for another member?)", cluster.Name, cluster.Spec.ID, c.clusterID)
		c.complain(logger, cluster, EventClusterIDMismatch, msg)
		return false
	}
}

// complain logs and records problem once per change; "" clears it.
func (c *Controller) complain(logger klog.Logger, cluster *clusterv1alpha1.Cluster, reason, msg string) {
	if msg == c.identityProblem {
		return
	}
	c.identityProblem = msg
	if msg == "" {
		return
	}
	logger.Error(nil, msg)
	if reason != "" {
		c.event(cluster, corev1.EventTypeWarning, reason, "%s", msg)
	}
}

// write builds the new status and updates the hub only if it differs.
func (c *Controller) write(ctx context.Context, cluster *clusterv1alpha1.Cluster, probed health.Observation) {
	logger := klog.FromContext(ctx)
	now := c.opts.Clock.Now()
	ready := c.tracker.Observe(probed)
	status := cluster.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: clusterv1alpha1.ClusterConditionReady, Status: ready.Status, Reason: ready.Reason, Message: statuslimits.Text(ready.Message, maxConditionMessage),
		LastTransitionTime: metav1.NewTime(now),
	})
	if c.opts.Metrics != nil {
		c.opts.Metrics.SetCondition(clusterv1alpha1.ClusterConditionReady, string(ready.Status))
	}
	if c.opts.DNS != nil {
		if dns, ok := c.opts.DNS(now); ok {
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{
				Type: clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady, Status: dns.Status,
				Reason: dns.Reason, Message: statuslimits.Text(dns.Message, maxConditionMessage), LastTransitionTime: metav1.NewTime(now),
			})
			if c.opts.Metrics != nil {
				c.opts.Metrics.SetCondition(clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady, string(dns.Status))
			}
		}
	}
	// Inventory only from a member that answers: while it is down the last
	// known inventory stands (the hub judges by the conditions).
	if ready.Status == metav1.ConditionTrue && probed.Status == metav1.ConditionTrue {
		c.inventory(ctx, status)
	}
	if equality.Semantic.DeepEqual(*status, cluster.Status) {
		return
	}
	if !c.mayWrite(ctx, ready.Status != metav1.ConditionTrue) {
		return
	}
	updated := cluster.DeepCopy()
	updated.Status = *status
	wctx, cancel := context.WithTimeout(ctx, hubRequestTimeout)
	_, err := c.hub.ClusterV1alpha1().Clusters().UpdateStatus(wctx, updated, metav1.UpdateOptions{})
	cancel()
	c.countWrite(err)
	if c.writeTracker.Observe(logger, err) != "" {
		return
	}
	c.recordTransitions(logger, cluster, status)
}

// inventory fills version, API enablements and summaries. Each part that
// cannot be read keeps its previous value.
func (c *Controller) inventory(ctx context.Context, status *clusterv1alpha1.ClusterStatus) {
	logger := klog.FromContext(ctx)
	discoveryCtx, cancel := context.WithTimeout(ctx, hubRequestTimeout)
	apis, reused, err := c.apiCache.discoverAPIs(discoveryCtx, c.member.Discovery())
	cancel()
	if apis != nil {
		status.APIEnablements = apis
	} else if err != nil {
		logger.V(2).Info("Cannot discover the member's APIs", "err", err)
	}
	vc := &c.versionCache
	vc.age++
	if NeedVersion(vc.version != "", vc.stale, !reused, vc.age) {
		if v, err := c.member.Discovery().ServerVersion(); err == nil {
			vc.version, vc.age, vc.stale = statuslimits.Text(v.GitVersion, maxKubernetesVersion), 0, false
		} else {
			logger.V(2).Info("Cannot read the member's version", "err", err)
		}
	}
	if vc.version != "" {
		status.KubernetesVersion = vc.version
	}
	for _, synced := range c.synced {
		if !synced() {
			return
		}
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return
	}
	status.NodeSummary = NodeSummary(nodes)
	status.ResourceSummary = ResourceSummary(nodes, pods)
}

// recordTransitions emits events for condition changes just written.
func (c *Controller) recordTransitions(logger klog.Logger, old *clusterv1alpha1.Cluster, status *clusterv1alpha1.ClusterStatus) {
	for _, t := range []string{clusterv1alpha1.ClusterConditionReady, clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady} {
		now := meta.FindStatusCondition(status.Conditions, t)
		if now == nil {
			continue
		}
		before := meta.FindStatusCondition(old.Status.Conditions, t)
		if before != nil && before.Status == now.Status {
			continue
		}
		logger.Info("Cluster condition changed", "condition", t, "status", now.Status, "reason", now.Reason, "message", now.Message)
		eventType, reason := corev1.EventTypeNormal, now.Reason
		if now.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		if t == clusterv1alpha1.ClusterConditionServiceDomainNameResolutionReady {
			reason = EventDNSResolutionReady
			if now.Status != metav1.ConditionTrue {
				reason = EventDNSResolutionFailing
			}
		}
		c.event(old, eventType, reason, "%s is %s: %s", t, now.Status, now.Message)
	}
}

func (c *Controller) event(cluster *clusterv1alpha1.Cluster, eventType, reason, format string, args ...any) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(cluster, eventType, reason, format, args...)
	}
}

func (c *Controller) countWrite(err error) {
	if c.opts.Metrics == nil {
		return
	}
	if err != nil {
		c.opts.Metrics.StatusWrites.WithLabelValues("error").Inc()
	} else {
		c.opts.Metrics.StatusWrites.WithLabelValues("success").Inc()
	}
}
