// Package hubmetrics holds the hub controllers' Prometheus metrics, created
// per hub run on the registry it serves.
package hubmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-io/flotilla/pkg/metrics"
)

const subsystem = "hub"

// Metrics are the hub's own metrics.
type Metrics struct {
	// Leader is 1 while this replica leads (runs the controllers).
	Leader prometheus.Gauge
	// LeadershipLost counts the terms this replica lost while running: it
	// stopped its controllers and campaigns again, still serving DNS and
	// the webhook.
	LeadershipLost prometheus.Counter
	// ClusterReady is 1 for each cluster's current Ready status.
	ClusterReady *prometheus.GaugeVec
	// LeaseAge is the age of each cluster's Lease as the hub last saw it.
	LeaseAge *prometheus.GaugeVec
	// UnknownLatency is the time from a Lease's expiry to Ready=Unknown.
	UnknownLatency prometheus.Histogram
	// TaintChanges counts taints added and removed by key, effect and action.
	TaintChanges *prometheus.CounterVec
	// ClusterObjectWrites counts the writes cluster-lifecycle makes to a
	// cluster's namespace, Lease and agent identity, by kind and operation
	// (a steady fleet makes none: a rising count means something keeps
	// deleting or changing them).
	ClusterObjectWrites *prometheus.CounterVec
	// FleetGuardState is 1 for the current fleet guard state.
	FleetGuardState *prometheus.GaugeVec
	// FleetGuardRegionState is 1 for each region's current guard state.
	FleetGuardRegionState *prometheus.GaugeVec
	// UnhealthyClusters is the number of not-Ready clusters per region ("" = all).
	UnhealthyClusters *prometheus.GaugeVec
	// NoExecuteSince is, per cluster with a NoExecute taint, when its
	// oldest one was added (Unix seconds): an alert on its age survives
	// hub restarts, which a `for:` clause would not.
	NoExecuteSince *prometheus.GaugeVec
	// WorksNotApplied is the number of Works per cluster the agent has not
	// applied at their current generation, by state (failed, pending).
	WorksNotApplied *prometheus.GaugeVec

	// ScheduleAttempts counts scheduling decisions by result (scheduled,
	// unschedulable, error) and schedule type (why it ran).
	ScheduleAttempts *prometheus.CounterVec
	// ScheduleLatency is the time one scheduling decision takes.
	ScheduleLatency *prometheus.HistogramVec
	// E2ESchedulingLatency is the time from dequeuing a binding to its
	// result written (decision plus API writes).
	E2ESchedulingLatency *prometheus.HistogramVec
	// AssumedReplicas is, per cluster, the replicas the scheduler placed
	// there that the cluster has not reported yet (overcommit protection:
	// subtracted from its room).
	AssumedReplicas *prometheus.GaugeVec
	// AssumptionReleases counts released assumptions by reason (Reported,
	// Rescheduled, BindingDeleted, ClusterDeleted, Expired, Undone).
	AssumptionReleases *prometheus.CounterVec
	// Evictions counts evictions by reason (TaintUntolerated,
	// ApplicationFailure) and result (evicted, rate_limited, held, error).
	Evictions *prometheus.CounterVec
	// EvictionLatency is the time from an eviction falling due (taint
	// added plus toleration) to the binding written.
	EvictionLatency prometheus.Histogram
	// EvictionQueueDepth is the taint manager's queue length.
	EvictionQueueDepth prometheus.Gauge
	// GracefulTasks is the number of open graceful eviction tasks by purge mode.
	GracefulTasks *prometheus.GaugeVec
	// GracefulTaskDuration is how long ended tasks were open, by purge mode
	// and why they ended.
	GracefulTaskDuration *prometheus.HistogramVec
	// TaintToHealthy is the time from a cluster's NoExecute taint to the
	// replacement placement being Healthy (a task ended that way).
	TaintToHealthy prometheus.Histogram
	// WorkOperations counts Works created, updated and deleted.
	WorkOperations *prometheus.CounterVec
	// BindingSyncLatency is the time one binding sync takes, by result.
	BindingSyncLatency *prometheus.HistogramVec

	// RemedyActions is 1 for each action in a cluster's remedyActions.
	RemedyActions *prometheus.GaugeVec
	// IngressBlockedClusters is the number of clusters running an
	// ingress's backends whose traffic a Remedy blocks.
	IngressBlockedClusters *prometheus.GaugeVec
	// IngressServingClusters is the number of clusters whose addresses an
	// ingress serves.
	IngressServingClusters *prometheus.GaugeVec

	// ForbiddenWrites counts the hub's writes the apiserver refused for
	// want of a permission, by resource (with subresource) and verb
	// (pkg/hub/forbidden counts them in the clients' transport).
	ForbiddenWrites *prometheus.CounterVec

	// PolicyPreemptions counts templates a policy with preemption Always
	// took from the policy that claimed them, by the kinds of both.
	PolicyPreemptions *prometheus.CounterVec
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "leader", Help: "1 while this hub replica leads and runs the controllers, 0 otherwise."}),
		LeadershipLost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "leadership_lost_total", Help: "Hub Lease terms this replica lost while running (it stopped its controllers, kept serving DNS and the webhook, and campaigns again)."}),
		ClusterReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "cluster_ready", Help: "1 for the cluster's current Ready status (True, False, Unknown)."}, []string{"cluster", "status"}),
		LeaseAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "cluster_lease_age_seconds", Help: "Time since the hub last saw the cluster's Lease advance."}, []string{"cluster"}),
		UnknownLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "lease_expiry_to_unknown_seconds", Help: "Time from a cluster Lease's expiry to Ready=Unknown being written.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 30}}),
		TaintChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "cluster_taint_changes_total", Help: "Taints added to or removed from clusters."}, []string{"key", "effect", "action"}),
		ClusterObjectWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "cluster_object_writes_total", Help: "Writes (create, update, delete) of clusters' namespaces, Leases and agent identities, by kind and operation."}, []string{"kind", "operation"}),
		FleetGuardState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "fleet_guard_state", Help: "1 for the fleet guard's current state (Normal, PartialDisruption, FullDisruption)."}, []string{"state"}),
		FleetGuardRegionState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "fleet_guard_region_state", Help: "1 for each region's fleet guard state (Normal, PartialDisruption, FullDisruption); region=\"\" holds the clusters without a region."}, []string{"region", "state"}),
		UnhealthyClusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "unhealthy_clusters", Help: "Clusters that are not Ready, per region (region=\"\" is the whole fleet)."}, []string{"region"}),
		NoExecuteSince: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "cluster_noexecute_taint_since_timestamp_seconds", Help: "When the oldest NoExecute taint of the cluster was added (Unix seconds); no series for a cluster without one."}, []string{"cluster"}),
		WorksNotApplied: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "works_not_applied", Help: "Works per cluster not applied at their current generation, by state (failed: Applied=False; pending: not yet reported)."}, []string{"cluster", "state"}),
		ScheduleAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "scheduler",
			Name: "schedule_attempts_total", Help: "Scheduling decisions by result and schedule type."}, []string{"result", "schedule_type"}),
		ScheduleLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "scheduler",
			Name: "scheduling_algorithm_duration_seconds", Help: "Time one scheduling decision takes, by result and schedule type.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"result", "schedule_type"}),
		E2ESchedulingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "scheduler",
			Name: "e2e_scheduling_duration_seconds", Help: "Time from taking a binding off the queue to its result written, by result and schedule type.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"result", "schedule_type"}),
		AssumedReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "scheduler",
			Name: "assumed_replicas", Help: "Replicas the scheduler placed on the cluster that its resource summary does not show yet; subtracted from its room."}, []string{"cluster"}),
		AssumptionReleases: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "scheduler",
			Name: "assumption_releases_total", Help: "Assumed placements released, by reason (Reported, Rescheduled, BindingDeleted, ClusterDeleted, Expired, Undone)."}, []string{"reason"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "eviction",
			Name: "evictions_total", Help: "Workload evictions from clusters by reason and result (evicted, rate_limited, held by the fleet guard, rollout: left to a staged rollout whose revision the copy runs, error)."}, []string{"reason", "result"}),
		EvictionLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "eviction",
			Name: "latency_seconds", Help: "Time from an eviction falling due (NoExecute taint added plus toleration) to the binding written.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		EvictionQueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "eviction",
			Name: "queue_depth", Help: "Bindings waiting in the taint manager's queue."}),
		GracefulTasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "eviction",
			Name: "graceful_tasks", Help: "Open graceful eviction tasks by purge mode."}, []string{"purge_mode"}),
		GracefulTaskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "eviction",
			Name: "graceful_task_duration_seconds", Help: "How long ended graceful eviction tasks were open, by purge mode and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 15)}, []string{"purge_mode", "outcome"}),
		TaintToHealthy: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "eviction",
			Name: "taint_to_replacement_healthy_seconds", Help: "Time from a cluster's NoExecute taint to the replacement placement Healthy.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14)}),
		WorkOperations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "binding",
			Name: "work_operations_total", Help: "Works created, updated and deleted by the binding controller."}, []string{"operation"}),
		BindingSyncLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "binding",
			Name: "sync_duration_seconds", Help: "Time one binding sync takes, by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}, []string{"result"}),
		RemedyActions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "remedy",
			Name: "cluster_actions", Help: "1 for each action in a cluster's status.remedyActions."}, []string{"cluster", "action"}),
		IngressBlockedClusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "ingress",
			Name: "traffic_blocked_clusters", Help: "Clusters running a MultiClusterIngress's backends whose traffic is blocked (TrafficControl)."}, []string{"namespace", "name"}),
		IngressServingClusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "ingress",
			Name: "serving_clusters", Help: "Clusters whose load-balancer addresses a MultiClusterIngress serves."}, []string{"namespace", "name"}),
		ForbiddenWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "forbidden_writes_total", Help: "Writes the apiserver refused the hub for want of a permission (its role lacks the verb), by resource and verb."}, []string{"resource", "verb"}),
		PolicyPreemptions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "detector",
			Name: "policy_preemptions_total", Help: "Templates a policy with preemption Always took from the policy that claimed them, by the kind of the preempting and the preempted policy."},
			[]string{"preemptor", "preempted"}),
	}
	reg.MustRegister(m.RemedyActions, m.IngressBlockedClusters, m.IngressServingClusters)
	reg.MustRegister(m.Evictions, m.EvictionLatency, m.EvictionQueueDepth, m.GracefulTasks, m.GracefulTaskDuration, m.TaintToHealthy, m.ScheduleAttempts, m.ScheduleLatency, m.E2ESchedulingLatency, m.WorkOperations, m.BindingSyncLatency)
	reg.MustRegister(m.ClusterReady, m.LeaseAge, m.UnknownLatency, m.TaintChanges, m.FleetGuardState, m.FleetGuardRegionState, m.UnhealthyClusters)
	reg.MustRegister(m.ClusterObjectWrites)
	reg.MustRegister(m.NoExecuteSince, m.WorksNotApplied)
	reg.MustRegister(m.Leader, m.LeadershipLost)
	reg.MustRegister(m.ForbiddenWrites)
	reg.MustRegister(m.PolicyPreemptions)
	reg.MustRegister(m.AssumedReplicas, m.AssumptionReleases)
	return m
}
