package app

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// whereHistoryItems is how many of the latest failover history items
// `where` shows.
const whereHistoryItems = 5

// whereEvents is how many of the latest events `where` shows.
const whereEvents = 8

// WhereView is `kubectl flotilla where TEMPLATE`.
type WhereView struct {
	Template TemplateRef `json:"template"`
	// Binding is the binding's namespace/name ("" when there is none).
	Binding string `json:"binding,omitempty"`
	// Resource is the embedded object, Kind/name.
	Resource string `json:"resource,omitempty"`
	// Replicas is the workload's desired replicas (0: none or not a workload).
	Replicas int32          `json:"replicas,omitempty"`
	Clusters []WhereCluster `json:"clusters"`
	// EvictionTasks are the binding's graceful eviction tasks.
	EvictionTasks []EvictionTaskView `json:"evictionTasks,omitempty"`
	// Evictions are the binding's recent evictions (spec.evictionHistory,
	// newest first): the scheduler avoids these clusters for a while.
	Evictions []EvictionView `json:"evictions,omitempty"`
	// FailoverHistory is the latest items, newest first.
	FailoverHistory []FailoverView `json:"failoverHistory,omitempty"`
	// Conditions are the binding's and the template's, with their messages:
	// why it is (not) scheduled, (not) applied, (not) propagated.
	Conditions []ConditionView `json:"conditions,omitempty"`
	Events     []EventView     `json:"events,omitempty"`
	// Rollout sums up status.rollout ("" when there is none): the
	// revision, its phase, group and the stable revision.
	Rollout string `json:"rollout,omitempty"`
	// Problem says what could not be found (no binding: no policy selects
	// the template, or its manifest does not parse).
	Problem string `json:"problem,omitempty"`
}

// WhereCluster is one cluster the workload is scheduled on, reported from,
// or being evicted from.
type WhereCluster struct {
	Cluster string `json:"cluster"`
	// Scheduled is true when the cluster is in the binding's placement.
	Scheduled bool `json:"scheduled"`
	// Evicting is true while a graceful eviction task keeps the old copy.
	Evicting bool `json:"evicting,omitempty"`
	// Replicas is what the scheduler gave the cluster.
	Replicas int32 `json:"replicas,omitempty"`
	// Ready and Available are from the cluster's reported workload status
	// (nil when it reported none).
	Ready     *int64 `json:"ready,omitempty"`
	Available *int64 `json:"available,omitempty"`
	// Applied is the Work's Applied condition status ("" when unknown).
	Applied        string `json:"applied,omitempty"`
	AppliedMessage string `json:"appliedMessage,omitempty"`
	Health         string `json:"health,omitempty"`
	// Work is the Work's namespace/name, when it exists.
	Work string `json:"work,omitempty"`
	// WorkDeleting is true while the Work is being deleted (its agent
	// removes the copy from the member, then releases it).
	WorkDeleting bool `json:"workDeleting,omitempty"`
}

// EvictionTaskView is a graceful eviction task.
type EvictionTaskView struct {
	From      string       `json:"from"`
	Reason    string       `json:"reason"`
	Producer  string       `json:"producer"`
	PurgeMode string       `json:"purgeMode,omitempty"`
	Replicas  *int32       `json:"replicas,omitempty"`
	Message   string       `json:"message,omitempty"`
	Created   *metav1.Time `json:"created,omitempty"`
}

// EvictionView is an entry of the binding's eviction history.
type EvictionView struct {
	Cluster   string      `json:"cluster"`
	Reason    string      `json:"reason"`
	EvictedAt metav1.Time `json:"evictedAt"`
}

// FailoverView is a failover history item.
type FailoverView struct {
	Reason          string       `json:"reason"`
	From            string       `json:"from"`
	To              []string     `json:"to,omitempty"`
	Start           metav1.Time  `json:"start"`
	End             *metav1.Time `json:"end,omitempty"`
	DegradedSince   *metav1.Time `json:"degradedSince,omitempty"`
	DegradedSeconds int64        `json:"degradedSeconds,omitempty"`
	Message         string       `json:"message,omitempty"`
}

// ConditionView is a condition of Object (Binding or Template).
type ConditionView struct {
	Object             string      `json:"object"`
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// EventView is an event on the binding or the template.
type EventView struct {
	Object   string      `json:"object"`
	Type     string      `json:"type"`
	Reason   string      `json:"reason"`
	Message  string      `json:"message"`
	Count    int32       `json:"count,omitempty"`
	LastSeen metav1.Time `json:"lastSeen"`
}

// BuildWhereView joins what the hub knows of one template: its binding
// (nil when none), the binding's Works (by cluster) and events on both.
// Every input may be partial or missing.
func BuildWhereView(ref TemplateRef, tmpl *workv1alpha1.ResourceTemplate, b *workv1alpha1.ResourceBinding,
	works map[string]*workv1alpha1.Work, events []corev1.Event) WhereView {
	v := WhereView{Template: ref, Clusters: []WhereCluster{}}
	if tmpl != nil {
		if v.Template.TemplateName == "" {
			v.Template.TemplateName = tmpl.Name
			v.Template.TemplateKind = "ResourceTemplate"
			if tmpl.Namespace == "" {
				v.Template.TemplateKind = "ClusterResourceTemplate"
			}
		}
		if obj, err := workobjects.Object(tmpl); err == nil {
			v.Resource = obj.GetKind() + "/" + obj.GetName()
		}
	}
	if b != nil && b.Status.Rollout != nil {
		v.Rollout = rolloutSummary(b.Status.Rollout)
	}
	byName := map[string]*WhereCluster{}
	cluster := func(name string) *WhereCluster {
		if c := byName[name]; c != nil {
			return c
		}
		c := &WhereCluster{Cluster: name}
		byName[name] = c
		return c
	}
	if b != nil {
		v.Binding = workobjects.Key(b)
		if v.Resource == "" && b.Spec.Resource.Kind != "" {
			v.Resource = b.Spec.Resource.Kind + "/" + b.Spec.Resource.Name
		}
		v.Replicas = b.Spec.Replicas
		for _, tc := range b.Spec.Clusters {
			c := cluster(tc.Name)
			c.Scheduled, c.Replicas = true, tc.Replicas
		}
		for _, task := range b.Spec.GracefulEvictionTasks {
			cluster(task.FromCluster).Evicting = true
			v.EvictionTasks = append(v.EvictionTasks, EvictionTaskView{From: task.FromCluster, Reason: task.Reason, Producer: task.Producer,
				PurgeMode: string(task.PurgeMode), Replicas: task.Replicas, Message: task.Message, Created: task.CreationTimestamp})
		}
		for _, s := range b.Status.AggregatedStatus {
			c := cluster(s.ClusterName)
			c.Health = string(s.Health)
			switch {
			case s.Applied:
				c.Applied, c.AppliedMessage = string(metav1.ConditionTrue), s.AppliedMessage
			case s.AppliedMessage != "":
				c.Applied, c.AppliedMessage = string(metav1.ConditionFalse), s.AppliedMessage
			}
			c.Ready, c.Available = replicaCounts(s.Status)
		}
		for i := len(b.Spec.EvictionHistory) - 1; i >= 0 && len(v.Evictions) < whereHistoryItems; i-- {
			e := b.Spec.EvictionHistory[i]
			v.Evictions = append(v.Evictions, EvictionView{Cluster: e.ClusterName, Reason: e.Reason, EvictedAt: e.EvictedAt})
		}
		hist := b.Status.FailoverHistory
		for i := len(hist) - 1; i >= 0 && len(v.FailoverHistory) < whereHistoryItems; i-- {
			h := hist[i]
			v.FailoverHistory = append(v.FailoverHistory, FailoverView{Reason: h.Reason, From: h.OriginCluster, To: h.ClustersAfterFailover,
				Start: h.StartTime, End: h.EndTime, DegradedSince: h.DegradedSince, DegradedSeconds: h.DegradedSeconds, Message: h.Message})
		}
		v.Conditions = append(v.Conditions, conditionViews("Binding", b.Status.Conditions)...)
	} else if v.Problem == "" {
		v.Problem = "no binding: the template is not propagated (see its Propagated condition)"
	}
	for name, w := range works {
		c := cluster(name)
		c.Work = w.Namespace + "/" + w.Name
		c.WorkDeleting = w.DeletionTimestamp != nil
		if a := meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied); a != nil {
			c.Applied = string(a.Status)
			if a.Status != metav1.ConditionTrue && a.Message != "" {
				c.AppliedMessage = a.Message
			}
		}
		if len(w.Status.ManifestStatuses) > 0 {
			ms := w.Status.ManifestStatuses[0]
			if c.Health == "" {
				c.Health = string(ms.Health)
			}
			if c.Ready == nil && c.Available == nil {
				c.Ready, c.Available = replicaCounts(ms.Status)
			}
		}
	}
	for _, c := range byName {
		v.Clusters = append(v.Clusters, *c)
	}
	sort.Slice(v.Clusters, func(i, j int) bool { return v.Clusters[i].Cluster < v.Clusters[j].Cluster })
	if tmpl != nil {
		// The template mirrors most of its binding's conditions: show only
		// what says something the binding's do not.
		for _, c := range conditionViews("Template", tmpl.Status.Conditions) {
			if !slices.ContainsFunc(v.Conditions, func(b ConditionView) bool {
				return b.Type == c.Type && b.Status == c.Status && b.Message == c.Message
			}) {
				v.Conditions = append(v.Conditions, c)
			}
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return eventTime(events[i]).After(eventTime(events[j]).Time) })
	for _, e := range events {
		if len(v.Events) == whereEvents {
			break
		}
		v.Events = append(v.Events, EventView{Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Type: e.Type,
			Reason: e.Reason, Message: e.Message, Count: e.Count, LastSeen: eventTime(e)})
	}
	return v
}

func conditionViews(object string, conds []metav1.Condition) []ConditionView {
	out := make([]ConditionView, 0, len(conds))
	for _, c := range conds {
		out = append(out, ConditionView{Object: object, Type: c.Type, Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: c.LastTransitionTime})
	}
	return out
}

// eventTime is when an event was last seen: lastTimestamp for core/v1
// events, eventTime (series or not) for events.k8s.io ones.
func eventTime(e corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: e.Series.LastObservedTime.Time}
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	}
	return e.CreationTimestamp
}

// replicaCounts reads readyReplicas and availableReplicas of a workload's
// reported status; nil when the status has none.
func replicaCounts(raw *runtime.RawExtension) (ready, available *int64) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	var st map[string]any
	if json.Unmarshal(raw.Raw, &st) != nil {
		return nil, nil
	}
	num := func(key string) *int64 {
		f, ok := st[key].(float64)
		if !ok {
			return nil
		}
		n := int64(f)
		return &n
	}
	ready, available = num("readyReplicas"), num("availableReplicas")
	// A Deployment reports no readyReplicas at all while it has none.
	if _, ok := st["replicas"]; ok {
		zero := int64(0)
		if ready == nil {
			ready = &zero
		}
		if available == nil {
			available = &zero
		}
	}
	return ready, available
}

func newWhereCommand(o *Options) *cobra.Command {
	var clusterScoped, all bool
	cmd := &cobra.Command{
		Use:   "where [TEMPLATE]",
		Short: "Show where a template's workload runs: clusters, replicas, health, eviction tasks, failover history and why.",
		Long: `Show where a template's workload runs. TEMPLATE is a ResourceTemplate's name
(in -n, default the context's namespace), resourcetemplate/NAME,
clusterresourcetemplate/NAME (or NAME with --cluster-scoped), or KIND/NAME of
the object the template carries (deployment/nginx, deploy/nginx).

For each cluster: the replicas scheduled there, ready and available replicas
as the member reported them, the Work's Applied condition and the health; then
graceful eviction tasks (a copy kept on a cluster the workload is leaving),
the latest failover history items, the binding's and template's conditions
with their messages, and recent events.

Without TEMPLATE: one line per binding of the namespace (-A: of every
namespace, and the cluster-scoped ones): its template, placement, Scheduled
and FullyApplied, clusters being evicted from, and the last failover.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(false); err != nil {
				return err
			}
			if len(args) == 1 && all {
				return fmt.Errorf("-A lists every binding; it takes no TEMPLATE")
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				v, err := o.whereList(cmd.Context(), c, all)
				if err != nil {
					return err
				}
				return o.printWhereList(v, all)
			}
			ref, err := ParseTemplateArg(args[0], c.namespace, clusterScoped)
			if err != nil {
				return err
			}
			v, err := o.whereView(cmd.Context(), c, ref)
			if err != nil {
				return err
			}
			return o.printWhere(v)
		},
	}
	cmd.Flags().BoolVar(&clusterScoped, "cluster-scoped", false, "TEMPLATE is a ClusterResourceTemplate (or KIND/NAME a cluster-scoped object).")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Without TEMPLATE: list the bindings of every namespace and the cluster-scoped ones.")
	return cmd
}

func (o *Options) whereView(ctx context.Context, c *clients, ref TemplateRef) (WhereView, error) {
	r, err := resolve(ctx, c, ref)
	if err != nil {
		return WhereView{}, err
	}
	works := map[string]*workv1alpha1.Work{}
	var events []corev1.Event
	if r.binding != nil {
		// The binding's Works, wherever they are, by the label the hub
		// indexes them with.
		wl, err := c.flotilla.WorkV1alpha1().Works("").List(ctx, metav1.ListOptions{
			LabelSelector: workobjects.LabelBindingUID + "=" + string(r.binding.UID)})
		if err != nil {
			fmt.Fprintf(o.ErrOut, "Warning: cannot list the binding's Works: %v\n", err)
		} else {
			for i := range wl.Items {
				w := &wl.Items[i]
				name := w.Annotations[workobjects.AnnotationCluster]
				if name == "" {
					name = strings.TrimPrefix(w.Namespace, "flotilla-es-")
				}
				works[name] = w
			}
		}
		events = append(events, o.eventsOn(ctx, c, bindingKind(r.binding), r.binding.Namespace, r.binding.Name)...)
	}
	if r.template != nil {
		events = append(events, o.eventsOn(ctx, c, templateKind(r.template), r.template.Namespace, r.template.Name)...)
	}
	v := BuildWhereView(r.ref, r.template, r.binding, works, events)
	if r.problem != "" {
		v.Problem = r.problem
	}
	return v, nil
}

func bindingKind(b *workv1alpha1.ResourceBinding) string {
	if b.Namespace == "" {
		return "ClusterResourceBinding"
	}
	return "ResourceBinding"
}

func templateKind(t *workv1alpha1.ResourceTemplate) string {
	if t.Namespace == "" {
		return "ClusterResourceTemplate"
	}
	return "ResourceTemplate"
}

// eventsOn lists the events on one object; events on cluster-scoped
// objects are recorded in "default". Errors only warn: events are extra.
func (o *Options) eventsOn(ctx context.Context, c *clients, kind, ns, name string) []corev1.Event {
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	list, err := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		fmt.Fprintf(o.ErrOut, "Warning: cannot list events on %s %s: %v\n", kind, name, err)
		return nil
	}
	return list.Items
}

func (o *Options) printWhere(v WhereView) error {
	if done, err := o.printStructured(v); done {
		return err
	}
	now := o.Now()
	out := o.Out
	name := v.Template.TemplateName
	if name == "" {
		name = "<none>"
	}
	kind := v.Template.TemplateKind
	if kind == "" {
		kind = "Template"
	}
	head := [][2]string{{kind + ":", name + inNamespaceShort(v.Template.Namespace)}, {"Resource:", orNone(v.Resource)}, {"Binding:", orNone(v.Binding)}}
	if v.Replicas > 0 {
		head = append(head, [2]string{"Replicas:", strconv.Itoa(int(v.Replicas))})
	}
	if v.Rollout != "" {
		head = append(head, [2]string{"Rollout:", v.Rollout})
	}
	if v.Problem != "" {
		head = append(head, [2]string{"Problem:", v.Problem})
	}
	if err := fields2(out, head); err != nil {
		return err
	}
	fmt.Fprintln(out)
	t := newTable(out, "CLUSTER", "SCHEDULED", "REPLICAS", "READY", "AVAILABLE", "APPLIED", "HEALTH", "MESSAGE")
	for _, c := range v.Clusters {
		scheduled := "yes"
		switch {
		case c.Evicting && !c.Scheduled:
			scheduled = "evicting"
		case !c.Scheduled:
			scheduled = "no"
		}
		replicas := "-"
		if c.Scheduled {
			replicas = strconv.Itoa(int(c.Replicas))
		}
		msg := c.AppliedMessage
		if c.WorkDeleting && msg == "" {
			msg = "Work being deleted: waiting for the cluster's agent to remove the copy"
		}
		t.row(c.Cluster, scheduled, replicas, count(c.Ready), count(c.Available), c.Applied, c.Health, msg)
	}
	if len(v.Clusters) == 0 {
		t.row("", "", "", "", "", "", "", "scheduled nowhere")
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(v.EvictionTasks) > 0 {
		heading(out, "Graceful eviction tasks:")
		t := newTable(out, "FROM", "REASON", "PRODUCER", "PURGE-MODE", "REPLICAS", "AGE", "MESSAGE")
		for _, e := range v.EvictionTasks {
			replicas := ""
			if e.Replicas != nil {
				replicas = strconv.Itoa(int(*e.Replicas))
			}
			t.row(e.From, e.Reason, e.Producer, e.PurgeMode, replicas, age(now, e.Created), e.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(v.Evictions) > 0 {
		heading(out, "Recent evictions (the scheduler avoids these clusters for a while):")
		t := newTable(out, "CLUSTER", "REASON", "AGE")
		for _, e := range v.Evictions {
			t.row(e.Cluster, e.Reason, age(now, &e.EvictedAt))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(v.FailoverHistory) > 0 {
		heading(out, "Failover history (newest first):")
		t := newTable(out, "REASON", "FROM", "TO", "STARTED", "DEGRADED", "MESSAGE")
		for _, h := range v.FailoverHistory {
			t.row(h.Reason, h.From, strings.Join(h.To, ","), age(now, &h.Start)+" ago", degraded(now, h), h.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(v.Conditions) > 0 {
		heading(out, "Conditions:")
		t := newTable(out, "OBJECT", "TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
		for _, c := range v.Conditions {
			t.row(c.Object, c.Type, c.Status, c.Reason, age(now, &c.LastTransitionTime), c.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(v.Events) > 0 {
		heading(out, "Events (newest first):")
		t := newTable(out, "LAST-SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
		for _, e := range v.Events {
			t.row(age(now, &e.LastSeen), e.Type, e.Reason, e.Object, e.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

// degraded says how long the workload ran short in a failover: the
// recorded total once it ended, else since when it has been.
func degraded(now time.Time, h FailoverView) string {
	switch {
	case h.End != nil:
		return duration.HumanDuration(time.Duration(h.DegradedSeconds) * time.Second)
	case h.DegradedSince != nil:
		return "for " + age(now, h.DegradedSince) + " (ongoing)"
	}
	return "ongoing"
}

func count(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func inNamespaceShort(ns string) string {
	if ns == "" {
		return ""
	}
	return " (namespace " + ns + ")"
}

// rolloutSummary is one line of a rollout: "revision 2 Halted in group
// canary (stable 1; kubectl flotilla rollout status)".
func rolloutSummary(r *workv1alpha1.RolloutStatus) string {
	out := fmt.Sprintf("revision %d %s", r.Revision, r.Phase)
	if r.Group != "" && r.Phase != workv1alpha1.RolloutPhaseComplete {
		out += " in group " + r.Group
	}
	if r.StableRevision != r.Revision {
		out += fmt.Sprintf(" (stable %d; kubectl flotilla rollout status)", r.StableRevision)
	}
	return out
}
