package app

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Results of a cluster in `explain`.
const (
	ResultSelected    = "Selected"
	ResultNotSelected = "NotSelected"
	ResultFiltered    = "Filtered"
)

// NoDecisionNote is what explain says of a binding without a recorded
// decision.
const NoDecisionNote = "no scheduling decision recorded: scheduled before decisions were recorded, or not scheduled yet; the next schedule records one"

// ExplainView is `kubectl flotilla explain TEMPLATE`.
type ExplainView struct {
	Template TemplateRef `json:"template"`
	Binding  string      `json:"binding,omitempty"`
	// Recorded is false when the binding has no decision (yet).
	Recorded     bool         `json:"recorded"`
	DecidedTime  *metav1.Time `json:"decidedTime,omitempty"`
	AffinityName string       `json:"affinityName,omitempty"`
	// Scheduled is the binding's Scheduled condition (the decision's
	// outcome in words), when present.
	Scheduled *ConditionView   `json:"scheduled,omitempty"`
	Clusters  []ExplainCluster `json:"clusters"`
	// FilteredCounts are the clusters each filter removed, fleet-wide.
	FilteredCounts []workv1alpha1.FilterCount `json:"filteredCounts,omitempty"`
	// OmittedClusters is how many clusters the decision does not list.
	OmittedClusters int32 `json:"omittedClusters,omitempty"`
	// Cluster is --cluster, when given.
	Cluster string `json:"cluster,omitempty"`
	// Notes say what the table cannot: no decision, an omitted cluster.
	Notes []string `json:"notes,omitempty"`
}

// ExplainCluster is the scheduler's verdict on one cluster.
type ExplainCluster struct {
	Cluster  string `json:"cluster"`
	Result   string `json:"result"`
	Score    *int32 `json:"score,omitempty"`
	Replicas int32  `json:"replicas,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
}

// filterReasons are the decision reasons of a filter (the cluster never
// reached scoring).
var filterReasons = map[string]bool{
	workv1alpha1.DecisionClusterDeleting: true, workv1alpha1.DecisionClusterAffinityMismatch: true,
	workv1alpha1.DecisionTaintUntolerated: true, workv1alpha1.DecisionBlocked: true, workv1alpha1.DecisionEvicting: true,
	workv1alpha1.DecisionRecentlyEvicted: true, workv1alpha1.DecisionAPINotServed: true,
}

// resultOf classifies a verdict: selected; removed by a filter (a filter's
// reason, or no score); or scored but not selected.
func resultOf(d workv1alpha1.ClusterDecision) string {
	switch {
	case d.Selected:
		return ResultSelected
	case filterReasons[d.Reason] || d.Score == nil:
		return ResultFiltered
	}
	return ResultNotSelected
}

// BuildExplainView reads the binding's recorded scheduling decision
// (binding may be nil: nothing is bound), for every listed cluster or only
// cluster when it is not "".
func BuildExplainView(ref TemplateRef, b *workv1alpha1.ResourceBinding, cluster string) ExplainView {
	v := ExplainView{Template: ref, Cluster: cluster, Clusters: []ExplainCluster{}}
	if b == nil {
		v.Notes = append(v.Notes, "no binding: no policy selects the template, so nothing was scheduled")
		return v
	}
	v.Binding = workobjects.Key(b)
	if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionScheduled); c != nil {
		cv := conditionViews("Binding", []metav1.Condition{*c})[0]
		v.Scheduled = &cv
	}
	d := b.Status.SchedulingDecision
	if d == nil {
		v.Notes = append(v.Notes, NoDecisionNote)
		return v
	}
	v.Recorded = true
	if !d.DecidedTime.IsZero() {
		t := d.DecidedTime
		v.DecidedTime = &t
	}
	v.AffinityName, v.FilteredCounts, v.OmittedClusters = d.AffinityName, d.FilteredCounts, d.OmittedClusters
	found := false
	for _, c := range d.Clusters {
		if cluster != "" && c.ClusterName != cluster {
			continue
		}
		found = true
		v.Clusters = append(v.Clusters, ExplainCluster{Cluster: c.ClusterName, Result: resultOf(c), Score: c.Score,
			Replicas: c.Replicas, Reason: c.Reason, Message: c.Message})
	}
	if cluster != "" && !found {
		if d.OmittedClusters > 0 {
			v.Notes = append(v.Notes, fmt.Sprintf("cluster %s is one of the %d clusters the decision does not list (it lists every selected cluster and at most %d others); it was not selected. Filtered counts over the whole fleet: %s",
				cluster, d.OmittedClusters, workv1alpha1.MaxUnselectedClusterDecisions, filterCountsText(d.FilteredCounts)))
		} else {
			v.Notes = append(v.Notes, fmt.Sprintf("cluster %s is not in the decision: it was not a cluster of the fleet when the scheduler decided", cluster))
		}
	}
	return v
}

func filterCountsText(counts []workv1alpha1.FilterCount) string {
	if len(counts) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(counts))
	for _, c := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", c.Reason, c.Count))
	}
	return strings.Join(parts, ", ")
}

func newExplainCommand(o *Options) *cobra.Command {
	var clusterScoped bool
	var cluster string
	cmd := &cobra.Command{
		Use:   "explain TEMPLATE",
		Short: "Explain why each cluster was or was not chosen: the scheduler's recorded filter and score results.",
		Long: `Explain the scheduler's last decision for a template's binding
(status.schedulingDecision): for each cluster whether it was selected, removed
by a filter (which one, and why), or scored and left out, with its score and
replicas; the decision's time and clusterAffinities term; and how many
clusters each filter removed across the fleet. The decision lists every
selected cluster and at most 20 others; --cluster NAME says when NAME is one
of the clusters left out. TEMPLATE is read as by "where".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(false); err != nil {
				return err
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			ref, err := ParseTemplateArg(args[0], c.namespace, clusterScoped)
			if err != nil {
				return err
			}
			r, err := resolve(cmd.Context(), c, ref)
			if err != nil {
				return err
			}
			return o.printExplain(BuildExplainView(r.ref, r.binding, cluster))
		},
	}
	cmd.Flags().BoolVar(&clusterScoped, "cluster-scoped", false, "TEMPLATE is a ClusterResourceTemplate (or KIND/NAME a cluster-scoped object).")
	cmd.Flags().StringVar(&cluster, "cluster", "", "Explain only this cluster.")
	return cmd
}

func (o *Options) printExplain(v ExplainView) error {
	if done, err := o.printStructured(v); done {
		return err
	}
	out, now := o.Out, o.Now()
	head := [][2]string{{"Binding:", orNone(v.Binding)}}
	if v.Recorded {
		decided := "<unknown>"
		if v.DecidedTime != nil {
			decided = v.DecidedTime.UTC().Format("2006-01-02T15:04:05Z") + " (" + age(now, v.DecidedTime) + " ago)"
		}
		head = append(head, [2]string{"Decided:", decided})
		if v.AffinityName != "" {
			head = append(head, [2]string{"Affinity term:", v.AffinityName})
		}
		head = append(head, [2]string{"Filtered:", filterCountsText(v.FilteredCounts)})
		if v.OmittedClusters > 0 {
			head = append(head, [2]string{"Omitted:", fmt.Sprintf("%d clusters not listed (not selected)", v.OmittedClusters)})
		}
	}
	if s := v.Scheduled; s != nil {
		head = append(head, [2]string{"Scheduled:", s.Status + " (" + s.Reason + "): " + s.Message})
	}
	if err := fields2(out, head); err != nil {
		return err
	}
	if v.Recorded && len(v.Clusters) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "CLUSTER", "RESULT", "SCORE", "REPLICAS", "REASON", "MESSAGE")
		for _, c := range v.Clusters {
			score := "-"
			if c.Score != nil {
				score = strconv.Itoa(int(*c.Score))
			}
			replicas := "-"
			if c.Result == ResultSelected {
				replicas = strconv.Itoa(int(c.Replicas))
			}
			t.row(c.Cluster, c.Result, score, replicas, c.Reason, c.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	for _, n := range v.Notes {
		fmt.Fprintln(out)
		fmt.Fprintln(out, printable(n))
	}
	return nil
}
