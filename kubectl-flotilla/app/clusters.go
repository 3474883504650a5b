package app

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
)

// GuardUnknown is the guard mode shown when the hub has not published one
// (a hub older than the ConfigMap, or not running).
const GuardUnknown = "unknown"

// ClustersView is `kubectl flotilla clusters`.
type ClustersView struct {
	// Hub is which hub replica leads, from the hub's leader-election Lease.
	Hub HubView `json:"hub"`
	// Guard is the fleet guard's published verdict.
	Guard    GuardView        `json:"guard"`
	Clusters []ClusterSummary `json:"clusters"`
}

// HubView is which hub replica decides, and since when.
type HubView struct {
	// Leader is the Lease holder ("" when none or unread).
	Leader string `json:"leader,omitempty"`
	// Since is when the leader acquired the Lease; LastRenewal its last
	// renewal.
	Since       *metav1.Time `json:"since,omitempty"`
	LastRenewal *metav1.Time `json:"lastRenewal,omitempty"`
	// Current: renewed within the Lease duration, so the holder is
	// deciding now. False with a Leader: the holder has stopped renewing
	// (its host apiserver was away, or it is gone) and nothing decides
	// until a replica takes the Lease.
	Current bool `json:"current"`
	// Transitions counts the times the Lease changed hands.
	Transitions int32 `json:"transitions,omitempty"`
	// Problem says why the Lease could not be read.
	Problem string `json:"problem,omitempty"`
}

// HubLeaseName is the hub's leader-election Lease (its
// --leader-elect-resource-name default).
const HubLeaseName = "flotilla-hub"

// BuildHubView reads the hub's leader-election Lease (nil when missing) at
// now.
func BuildHubView(lease *coordinationv1.Lease, now time.Time) HubView {
	var v HubView
	if lease == nil {
		return v
	}
	if h := lease.Spec.HolderIdentity; h != nil {
		v.Leader = *h
	}
	if t := lease.Spec.AcquireTime; t != nil {
		v.Since = &metav1.Time{Time: t.Time}
	}
	if t := lease.Spec.RenewTime; t != nil {
		v.LastRenewal = &metav1.Time{Time: t.Time}
	}
	if n := lease.Spec.LeaseTransitions; n != nil {
		v.Transitions = *n
	}
	if v.Leader != "" && v.LastRenewal != nil && lease.Spec.LeaseDurationSeconds != nil {
		v.Current = now.Before(v.LastRenewal.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second))
	}
	return v
}

// hubLine is the one-line summary above the clusters table.
func hubLine(v HubView, now time.Time) string {
	switch {
	case v.Problem != "":
		return "Hub: unknown (" + v.Problem + ")"
	case v.Leader == "":
		return "Hub: no leader"
	case v.Current:
		return fmt.Sprintf("Hub: %s leads, since %s ago (renewed %s ago)", v.Leader, age(now, v.Since), age(now, v.LastRenewal))
	default:
		return fmt.Sprintf("Hub: no leader deciding: %s last renewed %s ago, past its Lease", v.Leader, age(now, v.LastRenewal))
	}
}

// GuardView is the fleet-wide verdict; Mode is "unknown" when the hub has
// published none (Published false).
type GuardView struct {
	Published bool         `json:"published"`
	Mode      string       `json:"mode"`
	NotReady  int          `json:"notReady,omitempty"`
	Total     int          `json:"total,omitempty"`
	Since     *metav1.Time `json:"since,omitempty"`
	// Problem says why a ConfigMap that exists could not be read.
	Problem string `json:"problem,omitempty"`
}

// ClusterSummary is one cluster's row.
type ClusterSummary struct {
	Name string `json:"name"`
	// Ready is the Ready condition's status ("" when never reported).
	Ready       string `json:"ready,omitempty"`
	ReadyReason string `json:"readyReason,omitempty"`
	// Taints are key:effect.
	Taints []string `json:"taints,omitempty"`
	// FleetGuard and RegionGuard are the guard modes that apply to the
	// cluster: the whole fleet's and its region's.
	FleetGuard  string `json:"fleetGuard"`
	RegionGuard string `json:"regionGuard"`
	// LastHeartbeat is the agent's Lease renewTime on the hub.
	LastHeartbeat *metav1.Time `json:"lastHeartbeat,omitempty"`
	// Agent is the Lease holder (the agent pod leading in the member).
	Agent             string   `json:"agent,omitempty"`
	RemedyActions     []string `json:"remedyActions,omitempty"`
	Region            string   `json:"region,omitempty"`
	Zones             []string `json:"zones,omitempty"`
	KubernetesVersion string   `json:"kubernetesVersion,omitempty"`
	Deleting          bool     `json:"deleting,omitempty"`
}

// BuildClustersView joins clusters with their Leases (by cluster name) and
// the guard ConfigMap (nil when missing). Any of them may be partial.
func BuildClustersView(clusters []clusterv1alpha1.Cluster, leases map[string]*coordinationv1.Lease, guardCM *corev1.ConfigMap) ClustersView {
	v := ClustersView{Guard: GuardView{Mode: GuardUnknown}, Clusters: []ClusterSummary{}}
	var published *clustertaint.PublishedGuard
	if guardCM != nil {
		g, err := clustertaint.ParseGuardConfigMap(guardCM.Data)
		if err != nil {
			v.Guard.Problem = err.Error()
		} else {
			published = &g
			v.Guard = GuardView{Published: true, Mode: g.Mode, NotReady: g.NotReady, Total: g.Total}
			if !g.Since.IsZero() {
				v.Guard.Since = &metav1.Time{Time: g.Since}
			}
		}
	}
	for _, c := range clusters {
		s := ClusterSummary{Name: c.Name, Region: c.Spec.Region, KubernetesVersion: c.Status.KubernetesVersion,
			RemedyActions: c.Status.RemedyActions, FleetGuard: v.Guard.Mode, RegionGuard: GuardUnknown,
			Deleting: c.DeletionTimestamp != nil}
		s.Zones = append(s.Zones, c.Spec.Zones...)
		if ready := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); ready != nil {
			s.Ready, s.ReadyReason = string(ready.Status), ready.Reason
		}
		for _, t := range c.Spec.Taints {
			s.Taints = append(s.Taints, t.Key+":"+string(t.Effect))
		}
		if published != nil {
			// A region the verdict does not list (a cluster added since)
			// has no verdict yet.
			if r, ok := published.Regions[c.Spec.Region]; ok {
				s.RegionGuard = r.Mode
			}
		}
		if l := leases[c.Name]; l != nil {
			if l.Spec.RenewTime != nil {
				s.LastHeartbeat = &metav1.Time{Time: l.Spec.RenewTime.Time}
			}
			if l.Spec.HolderIdentity != nil {
				s.Agent = *l.Spec.HolderIdentity
			}
		}
		v.Clusters = append(v.Clusters, s)
	}
	sort.Slice(v.Clusters, func(i, j int) bool { return v.Clusters[i].Name < v.Clusters[j].Name })
	return v
}

func newClustersCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:     "clusters",
		Aliases: []string{"cluster"},
		Short:   "List member clusters: readiness, taints, fleet guard mode, last heartbeat, remedy actions.",
		Long: `List member clusters: the Ready condition and its reason, taints (the
cluster.flotilla.io/ prefix shortened to its name), the fleet guard's mode for
the whole fleet and for the cluster's region ("unknown" when the hub has
published none), how long ago the agent last renewed its Lease on the hub,
and the remedy actions in force. -o wide adds region, zones, Kubernetes
version and the agent pod holding the Lease.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validateOutput(true); err != nil {
				return err
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			v, err := o.clustersView(cmd.Context(), c)
			if err != nil {
				return err
			}
			return o.printClusters(v)
		},
	}
}

func (o *Options) clustersView(ctx context.Context, c *clients) (ClustersView, error) {
	list, err := c.flotilla.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return ClustersView{}, err
	}
	leases := map[string]*coordinationv1.Lease{}
	// Every cluster's Lease, in one list: the hub labels them with their
	// cluster (the same selector its own informer uses).
	ll, err := c.kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{LabelSelector: clusterlifecycle.LabelCluster})
	if err != nil {
		fmt.Fprintf(o.ErrOut, "Warning: cannot list the clusters' Leases (no heartbeats shown): %v\n", err)
	} else {
		for i := range ll.Items {
			l := &ll.Items[i]
			name := l.Labels[clusterlifecycle.LabelCluster]
			if l.Name == name && l.Namespace == clusterlifecycle.Namespace(name) {
				leases[name] = l
			}
		}
	}
	cm, err := c.kube.CoreV1().ConfigMaps(o.HubNamespace).Get(ctx, clustertaint.GuardConfigMapName, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			fmt.Fprintf(o.ErrOut, "Warning: cannot read the fleet guard's verdict %s/%s: %v\n", o.HubNamespace, clustertaint.GuardConfigMapName, err)
		}
		cm = nil
	}
	v := BuildClustersView(list.Items, leases, cm)
	hubLease, err := c.kube.CoordinationV1().Leases(o.HubNamespace).Get(ctx, HubLeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		hubLease = nil
	case err != nil:
		v.Hub.Problem = err.Error()
		hubLease = nil
	}
	if v.Hub.Problem == "" {
		v.Hub = BuildHubView(hubLease, o.Now())
	}
	return v, nil
}

func (o *Options) printClusters(v ClustersView) error {
	if done, err := o.printStructured(v); done {
		return err
	}
	now := o.Now()
	if _, err := fmt.Fprintln(o.Out, printable(hubLine(v.Hub, now))); err != nil {
		return err
	}
	if len(v.Clusters) == 0 {
		_, err := fmt.Fprintln(o.ErrOut, "No clusters found.")
		return err
	}
	headers := []string{"NAME", "READY", "REASON", "TAINTS", "GUARD", "LAST-HEARTBEAT", "REMEDY"}
	wide := o.Output == "wide"
	if wide {
		headers = append(headers, "REGION", "ZONES", "VERSION", "AGENT")
	}
	t := newTable(o.Out, headers...)
	for _, c := range v.Clusters {
		ready := c.Ready
		if ready == "" {
			ready = "Unknown"
		}
		if c.Deleting {
			ready += ",Deleting"
		}
		heartbeat := "<never>"
		if c.LastHeartbeat != nil {
			heartbeat = age(now, c.LastHeartbeat) + " ago"
		}
		row := []string{c.Name, ready, c.ReadyReason, shortTaints(c.Taints), c.FleetGuard + "/" + c.RegionGuard, heartbeat,
			strings.Join(c.RemedyActions, ",")}
		if wide {
			row = append(row, c.Region, strings.Join(c.Zones, ","), c.KubernetesVersion, c.Agent)
		}
		t.row(row...)
	}
	return t.flush()
}

// shortTaints drops the cluster.flotilla.io/ prefix of the built-in taints.
func shortTaints(taints []string) string {
	out := make([]string, len(taints))
	for i, t := range taints {
		out[i] = strings.TrimPrefix(t, "cluster.flotilla.io/")
	}
	return strings.Join(out, ",")
}
