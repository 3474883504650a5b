package app

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// WhereListView is `kubectl flotilla where` without TEMPLATE: one line per
// binding of the namespace (-A: every namespace and the cluster-scoped
// ones).
type WhereListView struct {
	Items []WhereListItem `json:"items"`
}

// WhereListItem is one binding's placement in brief.
type WhereListItem struct {
	// Namespace is "" for a ClusterResourceBinding.
	Namespace string `json:"namespace,omitempty"`
	Binding   string `json:"binding"`
	// Template is the template owning the binding, Kind/name.
	Template string `json:"template,omitempty"`
	Resource string `json:"resource,omitempty"`
	// Clusters are the placement, "name(replicas)" for workloads.
	Clusters []string `json:"clusters,omitempty"`
	// Scheduled and FullyApplied are the conditions' statuses ("" absent).
	Scheduled    string `json:"scheduled,omitempty"`
	FullyApplied string `json:"fullyApplied,omitempty"`
	// Evicting are the clusters graceful eviction tasks keep a copy on.
	Evicting []string `json:"evicting,omitempty"`
	// LastFailover is the newest failover history item.
	LastFailover *FailoverView `json:"lastFailover,omitempty"`
}

// BuildWhereList summarises bindings, sorted by namespace and name.
func BuildWhereList(bindings []workv1alpha1.ResourceBinding) WhereListView {
	v := WhereListView{Items: []WhereListItem{}}
	for i := range bindings {
		b := &bindings[i]
		it := WhereListItem{Namespace: b.Namespace, Binding: b.Name}
		if owner := metav1.GetControllerOf(b); owner != nil {
			it.Template = owner.Kind + "/" + owner.Name
		}
		if b.Spec.Resource.Kind != "" {
			it.Resource = b.Spec.Resource.Kind + "/" + b.Spec.Resource.Name
		}
		for _, c := range b.Spec.Clusters {
			if b.Spec.Replicas > 0 {
				it.Clusters = append(it.Clusters, fmt.Sprintf("%s(%d)", c.Name, c.Replicas))
			} else {
				it.Clusters = append(it.Clusters, c.Name)
			}
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionScheduled); c != nil {
			it.Scheduled = string(c.Status)
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionFullyApplied); c != nil {
			it.FullyApplied = string(c.Status)
		}
		for _, t := range b.Spec.GracefulEvictionTasks {
			it.Evicting = append(it.Evicting, t.FromCluster)
		}
		if h := b.Status.FailoverHistory; len(h) > 0 {
			last := h[len(h)-1]
			it.LastFailover = &FailoverView{Reason: last.Reason, From: last.OriginCluster, To: last.ClustersAfterFailover,
				Start: last.StartTime, End: last.EndTime, DegradedSince: last.DegradedSince, DegradedSeconds: last.DegradedSeconds}
		}
		v.Items = append(v.Items, it)
	}
	sort.Slice(v.Items, func(i, j int) bool {
		a, b := v.Items[i], v.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Binding < b.Binding
	})
	return v
}

func (o *Options) whereList(ctx context.Context, c *clients, all bool) (WhereListView, error) {
	ns := c.namespace
	if all {
		ns = metav1.NamespaceAll
	}
	list, err := c.flotilla.WorkV1alpha1().ResourceBindings(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return WhereListView{}, err
	}
	bindings := list.Items
	if all {
		cl, err := c.flotilla.WorkV1alpha1().ClusterResourceBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			return WhereListView{}, err
		}
		for i := range cl.Items {
			bindings = append(bindings, *workobjects.FromClusterBinding(&cl.Items[i]))
		}
	}
	return BuildWhereList(bindings), nil
}

func (o *Options) printWhereList(v WhereListView, all bool) error {
	if done, err := o.printStructured(v); done {
		return err
	}
	if len(v.Items) == 0 {
		_, err := fmt.Fprintln(o.ErrOut, "No bindings found.")
		return err
	}
	now := o.Now()
	headers := []string{"TEMPLATE", "RESOURCE", "CLUSTERS", "SCHEDULED", "FULLYAPPLIED", "EVICTING", "LAST-FAILOVER"}
	if all {
		headers = append([]string{"NAMESPACE"}, headers...)
	}
	t := newTable(o.Out, headers...)
	for _, it := range v.Items {
		last := ""
		if f := it.LastFailover; f != nil {
			last = fmt.Sprintf("%s %s->%s %s ago", f.Reason, f.From, strings.Join(f.To, ","), age(now, &f.Start))
		}
		tmpl := it.Template
		if tmpl == "" {
			tmpl = "binding/" + it.Binding
		}
		row := []string{tmpl, it.Resource, strings.Join(it.Clusters, ","), it.Scheduled, it.FullyApplied, strings.Join(it.Evicting, ","), last}
		if all {
			row = append([]string{it.Namespace}, row...)
		}
		t.row(row...)
	}
	return t.flush()
}
