package dnsprobe

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/health"
)

// ResolverFromFile returns host:port of the first nameserver in a
// resolv.conf, the resolver a pod on this node uses.
func ResolverFromFile(path string) (string, error) {
	cfg, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return "", fmt.Errorf("reading resolver configuration: %w", err)
	}
	if len(cfg.Servers) == 0 {
		return "", fmt.Errorf("%s lists no nameserver", path)
	}
	return net.JoinHostPort(cfg.Servers[0], cfg.Port), nil
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Namespace in the member cluster where verdicts are published.
	Namespace string
	// NodeName is the node this agent pod runs on.
	NodeName string
	// Identity names this agent pod (written as the verdict's holder).
	Identity string
	// Server is the resolver (host:port) and Name the name to resolve.
	Server, Name string
	// Period between probes and Timeout of one probe.
	Period, Timeout time.Duration
	// SuccessThreshold and FailureThreshold damp the verdict.
	SuccessThreshold, FailureThreshold time.Duration
	// StaleThreshold is how long a published verdict stays fresh.
	StaleThreshold time.Duration
	Clock          clock.WithTicker
	Metrics        *agentmetrics.Metrics
}

// Runner probes DNS every period and publishes this node's damped verdict.
// Every agent pod runs one, leader or not.
type Runner struct {
	member  kubernetes.Interface
	opts    RunnerOptions
	tracker *health.ThresholdTracker

	lastRun atomic.Int64 // unix nanos of the last completed probe
	// published is the verdict Lease as last written; a write is skipped
	// while it already says the same and is far from going stale.
	published    *coordinationv1.Lease
	publishState string // "" when the last publish worked, else its error
}

// NewRunner returns a Runner writing to member.
func NewRunner(member kubernetes.Interface, opts RunnerOptions) *Runner {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Runner{member: member, opts: opts,
		tracker: health.NewThresholdTracker(opts.Clock, opts.SuccessThreshold, opts.FailureThreshold)}
}

// Run probes until ctx is done.
func (r *Runner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("node", r.opts.NodeName, "server", r.opts.Server, "name", r.opts.Name)
	logger.Info("Probing in-cluster DNS", "period", r.opts.Period)
	ticker := r.opts.Clock.NewTicker(r.opts.Period)
	defer ticker.Stop()
	for {
		r.ProbeOnce(klog.NewContext(ctx, logger))
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Healthy is a liveness check: the probe loop has completed a probe within
// three periods (plus the probe timeout) of now.
func (r *Runner) Healthy(context.Context) error {
	last := r.lastRun.Load()
	if last == 0 {
		return nil // not started yet; startup is readiness's business
	}
	limit := 3*r.opts.Period + r.opts.Timeout
	if age := r.opts.Clock.Since(time.Unix(0, last)); age > limit {
		return fmt.Errorf("last DNS probe finished %s ago (limit %s)", age.Round(time.Second), limit)
	}
	return nil
}

// ProbeOnce runs one probe and publishes the damped verdict.
func (r *Runner) ProbeOnce(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := r.opts.Clock.Now()
	obs := Probe(ctx, r.opts.Server, r.opts.Name, r.opts.Timeout)
	if ctx.Err() != nil {
		return
	}
	if m := r.opts.Metrics; m != nil {
		m.ProbeDuration.WithLabelValues(agentmetrics.ProbeDNS).Observe(r.opts.Clock.Since(start).Seconds())
		m.ProbeResults.WithLabelValues(agentmetrics.ProbeDNS, string(obs.Status), obs.Reason).Inc()
	}
	previous, hadPrevious := r.tracker.Current()
	effective := r.tracker.Observe(obs)
	if !hadPrevious || previous.Status != effective.Status {
		logger.Info("DNS verdict changed", "status", effective.Status, "reason", effective.Reason, "message", effective.Message)
	}
	if m := r.opts.Metrics; m != nil {
		m.SetCondition("NodeServiceDomainNameResolutionReady", string(effective.Status))
	}
	err := r.publish(ctx, effective)
	state := ""
	if err != nil {
		state = err.Error()
	}
	if state != r.publishState {
		if err != nil {
			logger.Error(err, "Cannot publish the node's DNS verdict in the member cluster; retrying every period")
		} else {
			logger.Info("Publishing the node's DNS verdict again")
		}
		r.publishState = state
	}
	r.lastRun.Store(r.opts.Clock.Now().UnixNano())
}

// publish writes the verdict Lease when the verdict changed or the last write
// is a quarter of the stale threshold old: fresh enough for the leader, yet
// few writes to the member apiserver.
func (r *Runner) publish(ctx context.Context, obs health.Observation) error {
	now := r.opts.Clock.Now()
	if p := r.published; p != nil && p.Labels[LabelStatus] == string(obs.Status) &&
		p.Labels[LabelReason] == obs.Reason && p.Annotations[AnnotationMessage] == obs.Message &&
		now.Sub(p.Spec.RenewTime.Time) < r.opts.StaleThreshold/4 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leases := r.member.CoordinationV1().Leases(r.opts.Namespace)
	name := VerdictLeaseName(r.opts.NodeName)
	base := r.published
	if base == nil {
		got, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			base = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Namespace}}
		case err != nil:
			return err
		default:
			base = got
		}
	}
	lease := base.DeepCopy()
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Labels[LabelVerdict] = "true"
	lease.Labels[LabelStatus] = string(obs.Status)
	lease.Labels[LabelReason] = obs.Reason
	lease.Annotations[AnnotationNode] = r.opts.NodeName
	lease.Annotations[AnnotationMessage] = obs.Message
	lease.Annotations[AnnotationServer] = r.opts.Server
	lease.Spec.HolderIdentity = ptr.To(r.opts.Identity)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(r.opts.StaleThreshold / time.Second))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if lease.OwnerReferences == nil {
		// Owned by its Node, so the garbage collector removes the verdict of
		// a node that leaves the cluster. Best effort: without the Node the
		// verdict simply goes stale.
		if node, err := r.member.CoreV1().Nodes().Get(ctx, r.opts.NodeName, metav1.GetOptions{}); err == nil {
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
	}
	var (
		written *coordinationv1.Lease
		err     error
	)
	if lease.ResourceVersion == "" {
		written, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	} else {
		written, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		r.published = nil
		return err
	}
	r.published = written
	return nil
}
