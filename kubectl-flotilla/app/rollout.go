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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/rollout"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// RolloutView is `kubectl flotilla rollout status TEMPLATE`: the template's
// status.rollout (mirrored there from its binding) and the steering
// annotations a person wrote on it.
type RolloutView struct {
	Template TemplateRef `json:"template"`
	// Resource is the embedded object, Kind/name.
	Resource string `json:"resource,omitempty"`
	// Approved is the template's rollout.flotilla.io/approve annotation
	// ("<revision>/<group>"), Resume its rollout.flotilla.io/resume.
	Approved string `json:"approved,omitempty"`
	Resume   string `json:"resume,omitempty"`
	// Groups are the groups in rollout order (as status.rollout.clusters
	// first names them; "remaining" last).
	Groups []string `json:"groups,omitempty"`
	// Rollout is status.rollout, its clusters sorted by group then name;
	// nil when the template has none.
	Rollout *workv1alpha1.RolloutStatus `json:"rollout,omitempty"`
	// Problem says why there is no rollout to show.
	Problem string `json:"problem,omitempty"`
}

// noRolloutState is what status says of a template without status.rollout.
const noRolloutState = "no rollout state yet: every change goes to all clusters at once unless its policy has a rolloutStrategy"

// rolloutGroups are the groups of rs in rollout order: the order in which
// status.rollout.clusters first names them, with the group of the clusters
// no decision group selects ("remaining") always last, as the hub updates
// it, and the group the rollout is in at its groupIndex. Clusters without
// a group (a Progressive rollout) name none.
func rolloutGroups(rs *workv1alpha1.RolloutStatus) []string {
	if rs == nil {
		return nil
	}
	var groups []string
	remaining := false
	for _, c := range rs.Clusters {
		switch {
		case c.Group == "":
		case c.Group == policyv1alpha1.RemainingGroupName:
			remaining = true
		case !slices.Contains(groups, c.Group):
			groups = append(groups, c.Group)
		}
	}
	// The group the rollout waits in may have no cluster left (its
	// canary failed over: the hub waits for an approval of it).
	if rs.Group != "" && rs.Group != policyv1alpha1.RemainingGroupName && !slices.Contains(groups, rs.Group) {
		groups = slices.Insert(groups, min(max(int(rs.GroupIndex), 0), len(groups)), rs.Group)
	}
	// groupIndex is the one place the status states outright.
	if i, at := slices.Index(groups, rs.Group), int(rs.GroupIndex); i >= 0 && at != i && at >= 0 && at < len(groups) {
		groups = slices.Insert(slices.Delete(groups, i, i+1), at, rs.Group)
	}
	if remaining {
		groups = append(groups, policyv1alpha1.RemainingGroupName)
	}
	return groups
}

// BuildRolloutView reads the rollout of tmpl (nil status.rollout: none
// yet). The template is not changed.
func BuildRolloutView(ref TemplateRef, tmpl *workv1alpha1.ResourceTemplate) RolloutView {
	v := RolloutView{Template: templateRefOf(ref, tmpl)}
	if obj, err := workobjects.Object(tmpl); err == nil {
		v.Resource = obj.GetKind() + "/" + obj.GetName()
	}
	v.Approved = tmpl.Annotations[workv1alpha1.AnnotationRolloutApprove]
	v.Resume = tmpl.Annotations[workv1alpha1.AnnotationRolloutResume]
	if tmpl.Status.Rollout == nil {
		v.Problem = noRolloutState
		return v
	}
	rs := tmpl.Status.Rollout.DeepCopy()
	v.Groups = rolloutGroups(rs)
	rank := func(g string) int {
		if i := slices.Index(v.Groups, g); i >= 0 {
			return i
		}
		return len(v.Groups) // no group: after every group
	}
	sort.SliceStable(rs.Clusters, func(i, j int) bool {
		a, b := rs.Clusters[i], rs.Clusters[j]
		if ra, rb := rank(a.Group), rank(b.Group); ra != rb {
			return ra < rb
		}
		return a.ClusterName < b.ClusterName
	})
	v.Rollout = rs
	return v
}

// templateRefOf is ref with the template's own kind, name and namespace
// (ref may have named the embedded object).
func templateRefOf(ref TemplateRef, tmpl *workv1alpha1.ResourceTemplate) TemplateRef {
	ref.TemplateKind, ref.TemplateName, ref.Namespace = templateKind(tmpl), tmpl.Name, tmpl.Namespace
	return ref
}

// templateLabel names a template in messages: "ResourceTemplate ns/name".
func templateLabel(tmpl *workv1alpha1.ResourceTemplate) string {
	return templateKind(tmpl) + " " + workobjects.Key(tmpl)
}

// RolloutApproval is what `rollout approve` writes, and why.
type RolloutApproval struct {
	Revision int64
	Group    string
	// Value is the annotation's new value, "<revision>/<group>".
	Value string
	// Previous is the annotation's value before ("" when none).
	Previous string
	// AlreadyApproved: the annotation says so already; nothing to write.
	AlreadyApproved bool
	// Notes say what the approval does given where the rollout is.
	Notes []string
}

// ChooseApproval is what approving group (empty: the group the rollout is
// in) of tmpl's current revision writes. It refuses a template without a
// rollout, a rollout that is Complete, a group its clusters do not name,
// and an approval that would withdraw a wider one of the same revision.
func ChooseApproval(tmpl *workv1alpha1.ResourceTemplate, group string) (RolloutApproval, error) {
	rs := tmpl.Status.Rollout
	if rs == nil {
		return RolloutApproval{}, fmt.Errorf("%s has %s: there is nothing to approve", templateLabel(tmpl), noRolloutState)
	}
	if rs.Phase == workv1alpha1.RolloutPhaseComplete {
		return RolloutApproval{}, fmt.Errorf("the rollout of revision %d of %s is Complete: there is nothing to approve", rs.Revision, templateLabel(tmpl))
	}
	if rs.Revision <= 0 {
		return RolloutApproval{}, fmt.Errorf("the rollout of %s names no revision (status.rollout.revision %d): there is nothing to approve", templateLabel(tmpl), rs.Revision)
	}
	groups := rolloutGroups(rs)
	if group == "" {
		group = rs.Group
		if group == "" {
			return RolloutApproval{}, fmt.Errorf("the rollout of revision %d of %s is in no group (phase %s): pass --group (one of: %s)",
				rs.Revision, templateLabel(tmpl), rs.Phase, groupList(groups))
		}
	}
	if !slices.Contains(groups, group) {
		return RolloutApproval{}, fmt.Errorf("revision %d of %s has no group %q: its clusters are in %s",
			rs.Revision, templateLabel(tmpl), group, groupList(groups))
	}
	a := RolloutApproval{Revision: rs.Revision, Group: group, Value: fmt.Sprintf("%d/%s", rs.Revision, group),
		Previous: tmpl.Annotations[workv1alpha1.AnnotationRolloutApprove]}
	if a.Previous == a.Value {
		a.AlreadyApproved = true
		return a, nil
	}
	if prevRev, prevGroup, ok := rollout.ParseApproval(a.Previous); ok && prevRev == rs.Revision &&
		slices.Index(groups, prevGroup) > slices.Index(groups, group) {
		return RolloutApproval{}, fmt.Errorf("revision %d of %s is already approved through group %s (%s=%s), which comes after %s: "+
			"writing %s would withdraw that approval; to narrow it, remove the annotation first (kubectl annotate %s %s %s-)",
			rs.Revision, templateLabel(tmpl), prevGroup, workv1alpha1.AnnotationRolloutApprove, a.Previous, group, a.Value,
			strings.ToLower(templateKind(tmpl)), tmpl.Name, workv1alpha1.AnnotationRolloutApprove)
	}
	switch {
	case resumable(rs.Phase):
		a.Notes = append(a.Notes, fmt.Sprintf("revision %d is %s: an approval does not resume it (kubectl flotilla rollout resume)", rs.Revision, rs.Phase))
	case rs.Phase == workv1alpha1.RolloutPhaseWaiting && rs.Reason == rollout.ReasonFleetGuardHolds:
		a.Notes = append(a.Notes, fmt.Sprintf("the rollout waits in group %s because the fleet guard holds it: no approval lifts that", rs.Group))
	case rs.Group == group && rs.Phase == workv1alpha1.RolloutPhaseWaiting:
		a.Notes = append(a.Notes, fmt.Sprintf("the rollout was waiting in group %s: the next group may start", group))
	case rs.Group == group:
		a.Notes = append(a.Notes, fmt.Sprintf("the rollout is %s in group %s: once the group succeeds the next one starts without waiting", orNone(string(rs.Phase)), group))
	case rs.Group != "" && slices.Index(groups, group) > slices.Index(groups, rs.Group):
		a.Notes = append(a.Notes, fmt.Sprintf("the rollout is %s in group %s: it will not wait after the groups up to %s", orNone(string(rs.Phase)), rs.Group, group))
	case rs.Group != "":
		a.Notes = append(a.Notes, fmt.Sprintf("the rollout is %s in group %s, after %s: this approval covers none of the groups still to come", orNone(string(rs.Phase)), rs.Group, group))
	}
	if an := rs.Analysis; an != nil && an.Phase == workv1alpha1.AnalysisInconclusive &&
		slices.Contains(groups, an.Group) && slices.Index(groups, an.Group) <= slices.Index(groups, group) {
		a.Notes = append(a.Notes, fmt.Sprintf("the inconclusive analysis of group %s is accepted", an.Group))
	}
	return a, nil
}

func groupList(groups []string) string {
	if len(groups) == 0 {
		return "no group"
	}
	return strings.Join(groups, ", ")
}

// RolloutResume is what `rollout resume` writes.
type RolloutResume struct {
	Revision int64
	// Value is the annotation's new value: "<revision>", or
	// "<revision>/<time>" when the hub has honoured "<revision>" before
	// (each value resumes once: status.rollout.resumed).
	Value string
	// AlreadyRequested: the annotation asks for it and the hub has not
	// honoured it yet; nothing to write.
	AlreadyRequested bool
	// Group is where the revision halted.
	Group string
}

// resumable are the phases of a halted revision, which the hub resumes:
// Halted, and RollingBack or RolledBack when the strategy rolls back.
func resumable(p workv1alpha1.RolloutPhase) bool {
	return p == workv1alpha1.RolloutPhaseHalted || p == workv1alpha1.RolloutPhaseRollingBack || p == workv1alpha1.RolloutPhaseRolledBack
}

// ChooseResume is what resuming tmpl's halted revision writes at now; it
// refuses a rollout that is not halted.
func ChooseResume(tmpl *workv1alpha1.ResourceTemplate, now time.Time) (RolloutResume, error) {
	rs := tmpl.Status.Rollout
	if rs == nil {
		return RolloutResume{}, fmt.Errorf("%s has %s: there is nothing to resume", templateLabel(tmpl), noRolloutState)
	}
	if !resumable(rs.Phase) {
		return RolloutResume{}, fmt.Errorf("revision %d of %s is %s, not Halted: only a halted revision is resumed", rs.Revision, templateLabel(tmpl), orNone(string(rs.Phase)))
	}
	if rs.Revision <= 0 {
		return RolloutResume{}, fmt.Errorf("the rollout of %s names no revision (status.rollout.revision %d): there is nothing to resume", templateLabel(tmpl), rs.Revision)
	}
	r := RolloutResume{Revision: rs.Revision, Group: rs.Group}
	cur := tmpl.Annotations[workv1alpha1.AnnotationRolloutResume]
	if rev, ok := rollout.ParseResume(cur); ok && rev == rs.Revision && cur != rs.Resumed {
		r.Value, r.AlreadyRequested = cur, true
		return r, nil
	}
	// The hub honours any value but the last it honoured: "<revision>"
	// unless that was it (resumed once already, and halted again).
	r.Value = strconv.FormatInt(rs.Revision, 10)
	if r.Value == rs.Resumed {
		r.Value = fmt.Sprintf("%d/%s", rs.Revision, now.UTC().Format("20060102T150405Z"))
	}
	return r, nil
}

// annotationPatch is a merge patch that sets one annotation.
func annotationPatch(key, value string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
}

func newRolloutCommand(o *Options) *cobra.Command {
	var clusterScoped bool
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "See and steer a template's staged rollout: status, approve a group, resume a halted revision.",
		Long: `See and steer the staged rollout of a template whose policy has a
rolloutStrategy. The state is the template's status.rollout (the hub mirrors it
from the binding); approve and resume write an annotation on the template, so
they need only get, list and patch on templates, nothing on bindings.

  kubectl flotilla rollout status web             # revision, phase, group, each cluster's verdict, history
  kubectl flotilla rollout approve web            # let the group the rollout waits in go on
  kubectl flotilla rollout approve web --group eu # approve the groups up to and including eu
  kubectl flotilla rollout resume web             # a Halted revision goes on

TEMPLATE is read as by "where": a ResourceTemplate's name, resourcetemplate/NAME,
clusterresourcetemplate/NAME (or NAME --cluster-scoped), or KIND/NAME of the
object the template carries.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().BoolVar(&clusterScoped, "cluster-scoped", false, "TEMPLATE is a ClusterResourceTemplate (or KIND/NAME a cluster-scoped object).")
	template := func(cmd *cobra.Command, arg string) (*clients, *workv1alpha1.ResourceTemplate, TemplateRef, error) {
		c, err := o.clients()
		if err != nil {
			return nil, nil, TemplateRef{}, err
		}
		ref, err := ParseTemplateArg(arg, c.namespace, clusterScoped)
		if err != nil {
			return nil, nil, TemplateRef{}, err
		}
		tmpl, err := getTemplate(cmd.Context(), c, ref)
		return c, tmpl, ref, err
	}

	status := &cobra.Command{
		Use:   "status TEMPLATE",
		Short: "Show a template's rollout: revision, stable revision, phase, group, analysis, each cluster's verdict and the revision history.",
		Long: `Show a template's rollout, from its status.rollout: the revision rolling out,
the last one that completed (stable), the phase (Progressing, Waiting, Halted,
RollingBack, RolledBack, Complete), the group it is in, why, the failures
counted and the current group's analysis; the approve and resume annotations
on the template; then one row per cluster (by group in rollout order, then
name): the revision it runs, its group, its verdict (Pending, Updating,
Soaking, Succeeded, Failed, Lost, RolledBack), when it was updated and since
when it is Healthy; then the kept revisions, newest first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(false); err != nil {
				return err
			}
			_, tmpl, ref, err := template(cmd, args[0])
			if err != nil {
				return err
			}
			return o.printRollout(BuildRolloutView(ref, tmpl))
		},
	}

	var group string
	approve := &cobra.Command{
		Use:   "approve TEMPLATE",
		Short: "Approve a group of the current revision (default: the group the rollout waits in).",
		Long: `Approve, for the template's current revision (status.rollout.revision), the
groups up to and including --group (default: status.rollout.group, the group
the rollout is in): writes rollout.flotilla.io/approve=<revision>/<group> on
the template. An inconclusive analysis of an approved group is accepted. The
revision is part of the value, so an approval never carries over to the next
change of the template. Refused without rollout state, for a Complete rollout,
for a group none of the rollout's clusters is in, and where it would withdraw
a wider approval of the same revision.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Output != "" {
				return fmt.Errorf("-o is for rollout status: approve prints what it wrote")
			}
			c, tmpl, _, err := template(cmd, args[0])
			if err != nil {
				return err
			}
			a, err := ChooseApproval(tmpl, group)
			if err != nil {
				return printableError(err)
			}
			label := templateLabel(tmpl)
			if a.AlreadyApproved {
				fmt.Fprintf(o.Out, "%s: revision %d is already approved through group %s (%s=%s); nothing written\n",
					printableArgs([]any{label, a.Revision, a.Group, workv1alpha1.AnnotationRolloutApprove, a.Value})...)
				return nil
			}
			if err := patchTemplateAnnotation(cmd.Context(), c, tmpl, workv1alpha1.AnnotationRolloutApprove, a.Value); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "%s: approved revision %d through group %s (%s=%s)\n",
				printableArgs([]any{label, a.Revision, a.Group, workv1alpha1.AnnotationRolloutApprove, a.Value})...)
			if a.Previous != "" {
				fmt.Fprintf(o.Out, "  replaces %s\n", printable(a.Previous))
			}
			for _, n := range a.Notes {
				fmt.Fprintf(o.Out, "  %s\n", printable(n))
			}
			return nil
		},
	}
	approve.Flags().StringVar(&group, "group", "", "The group to approve (with those before it); default: the group the rollout is in.")

	resume := &cobra.Command{
		Use:   "resume TEMPLATE",
		Short: "Resume a halted revision: writes rollout.flotilla.io/resume=<revision>.",
		Long: `Resume the template's halted revision (phase Halted, or RollingBack or RolledBack
when the strategy rolls back): writes rollout.flotilla.io/resume=<revision> on
the template; the hub forgets the failures counted so far and goes on. The hub
honours each value once (status.rollout.resumed): a revision resumed before
and halted again gets <revision>/<time>. Refused when the rollout is not
halted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Output != "" {
				return fmt.Errorf("-o is for rollout status: resume prints what it wrote")
			}
			c, tmpl, _, err := template(cmd, args[0])
			if err != nil {
				return err
			}
			r, err := ChooseResume(tmpl, o.Now())
			if err != nil {
				return printableError(err)
			}
			label := templateLabel(tmpl)
			if r.AlreadyRequested {
				fmt.Fprintf(o.Out, "%s: resuming revision %d is already requested (%s=%s) and not honoured yet; nothing written\n",
					printableArgs([]any{label, r.Revision, workv1alpha1.AnnotationRolloutResume, r.Value})...)
				return nil
			}
			if err := patchTemplateAnnotation(cmd.Context(), c, tmpl, workv1alpha1.AnnotationRolloutResume, r.Value); err != nil {
				return err
			}
			where := ""
			if r.Group != "" {
				where = " (halted in group " + r.Group + ")"
			}
			fmt.Fprintf(o.Out, "%s: resumed revision %d%s: wrote %s=%s; the failures counted so far are forgotten\n",
				printableArgs([]any{label, r.Revision, where, workv1alpha1.AnnotationRolloutResume, r.Value})...)
			return nil
		},
	}
	cmd.AddCommand(status, approve, resume)
	return cmd
}

// printableError is err with its text made printable: refusals quote the
// template's status, which the hub wrote from what others reported.
func printableError(err error) error {
	return fmt.Errorf("%s", printable(err.Error()))
}

// getTemplate reads the template ref names, and nothing else: rollout needs
// no permission on bindings. KIND/NAME is found among the namespace's
// templates (or the cluster-scoped ones) by the object they carry.
func getTemplate(ctx context.Context, c *clients, ref TemplateRef) (*workv1alpha1.ResourceTemplate, error) {
	w := c.flotilla.WorkV1alpha1()
	switch ref.TemplateKind {
	case "ResourceTemplate":
		return w.ResourceTemplates(ref.Namespace).Get(ctx, ref.TemplateName, metav1.GetOptions{})
	case "ClusterResourceTemplate":
		t, err := w.ClusterResourceTemplates().Get(ctx, ref.TemplateName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return workobjects.FromClusterTemplate(t), nil
	}
	var candidates []*workv1alpha1.ResourceTemplate
	if ref.Namespace == "" {
		list, err := w.ClusterResourceTemplates().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			candidates = append(candidates, workobjects.FromClusterTemplate(&list.Items[i]))
		}
	} else {
		list, err := w.ResourceTemplates(ref.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			candidates = append(candidates, &list.Items[i])
		}
	}
	return templateCarrying(candidates, ref)
}

// templateCarrying is the one template of candidates whose object is
// ref's Kind/Name (the kind case-insensitive, as kubectl's).
func templateCarrying(candidates []*workv1alpha1.ResourceTemplate, ref TemplateRef) (*workv1alpha1.ResourceTemplate, error) {
	var found []*workv1alpha1.ResourceTemplate
	for _, t := range candidates {
		id, err := workobjects.Identity(t)
		if err != nil || !strings.EqualFold(id.Kind, ref.Kind) || id.Metadata.Name != ref.Name {
			continue
		}
		if ref.Namespace != "" && id.Metadata.Namespace != ref.Namespace {
			continue
		}
		found = append(found, t)
	}
	switch len(found) {
	case 0:
		kind := "ResourceTemplate"
		if ref.Namespace == "" {
			kind = "ClusterResourceTemplate"
		}
		return nil, fmt.Errorf("no %s carries %s/%s%s", kind, ref.Kind, ref.Name, inNamespace(ref.Namespace))
	case 1:
		return found[0], nil
	}
	names := make([]string, 0, len(found))
	for _, t := range found {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("%s/%s%s is carried by several templates (%s): name the template", ref.Kind, ref.Name, inNamespace(ref.Namespace), strings.Join(names, ", "))
}

// patchTemplateAnnotation sets one annotation on the template with a merge
// patch. No resourceVersion precondition: the value names the revision it
// is for, and the hub updates the template's status often.
func patchTemplateAnnotation(ctx context.Context, c *clients, tmpl *workv1alpha1.ResourceTemplate, key, value string) error {
	patch, err := annotationPatch(key, value)
	if err != nil {
		return err
	}
	w := c.flotilla.WorkV1alpha1()
	if tmpl.Namespace == "" {
		_, err = w.ClusterResourceTemplates().Patch(ctx, tmpl.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-flotilla"})
	} else {
		_, err = w.ResourceTemplates(tmpl.Namespace).Patch(ctx, tmpl.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-flotilla"})
	}
	return err
}

func (o *Options) printRollout(v RolloutView) error {
	if done, err := o.printStructured(v); done {
		return err
	}
	now := o.Now()
	out := o.Out
	head := [][2]string{{v.Template.TemplateKind + ":", v.Template.TemplateName + inNamespaceShort(v.Template.Namespace)}, {"Resource:", orNone(v.Resource)}}
	rs := v.Rollout
	if rs == nil {
		head = append(head, [2]string{"Rollout:", v.Problem})
		return fields2(out, head)
	}
	stable := "none yet"
	if rs.StableRevision > 0 {
		stable = strconv.FormatInt(rs.StableRevision, 10)
	}
	phase := orNone(string(rs.Phase))
	if rs.Reason != "" {
		phase += " (" + rs.Reason + ")"
	}
	head = append(head, [2]string{"Revision:", strconv.FormatInt(rs.Revision, 10)}, [2]string{"Stable revision:", stable},
		[2]string{"Phase:", phase})
	if rs.Group != "" {
		group := rs.Group
		if len(v.Groups) > 0 && slices.Contains(v.Groups, rs.Group) {
			group += fmt.Sprintf(" (group %d of %d: %s)", rs.GroupIndex+1, len(v.Groups), strings.Join(v.Groups, ", "))
		}
		head = append(head, [2]string{"Group:", group})
	}
	if rs.Message != "" {
		head = append(head, [2]string{"Message:", rs.Message})
	}
	if rs.HaltedTime != nil {
		head = append(head, [2]string{"Halted:", timeAndAge(now, rs.HaltedTime)})
	}
	head = append(head, [2]string{"Failures:", strconv.Itoa(int(rs.Failures))})
	if a := rs.Analysis; a != nil {
		s := fmt.Sprintf("group %s: %s (%d successful, %d failed, %d inconclusive)", a.Group, a.Phase, a.Successes, a.Failures, a.Inconclusive)
		if a.Message != "" {
			s += ": " + a.Message
		}
		head = append(head, [2]string{"Analysis:", s})
	}
	if v.Approved != "" {
		s := v.Approved + " (" + workv1alpha1.AnnotationRolloutApprove + ")"
		if rev, _, ok := rollout.ParseApproval(v.Approved); ok && rev != rs.Revision {
			s += fmt.Sprintf(": revision %d's, not the current one", rev)
		}
		head = append(head, [2]string{"Approved:", s})
	}
	if v.Resume != "" {
		s := v.Resume + " (" + workv1alpha1.AnnotationRolloutResume + ")"
		switch rev, _ := rollout.ParseResume(v.Resume); {
		case v.Resume == rs.Resumed:
			s += ": honoured"
		case rev != rs.Revision:
			s += ": not the current revision"
		default:
			s += ": not honoured yet"
		}
		head = append(head, [2]string{"Resume:", s})
	}
	if err := fields2(out, head); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if len(rs.Clusters) == 0 {
		fmt.Fprintln(out, "No cluster in the rollout yet.")
	} else {
		t := newTable(out, "CLUSTER", "REVISION", "GROUP", "VERDICT", "UPDATED", "HEALTHY-SINCE", "MESSAGE")
		for _, c := range rs.Clusters {
			rev := "-"
			if c.Revision > 0 {
				rev = strconv.FormatInt(c.Revision, 10)
			}
			t.row(c.ClusterName, rev, c.Group, string(c.Verdict), ago(now, c.UpdatedTime), ago(now, c.HealthySince), c.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(rs.Revisions) > 0 {
		heading(out, "Revisions (newest first):")
		t := newTable(out, "REVISION", "OUTCOME", "TEMPLATE-GENERATION", "CREATED")
		for _, r := range rs.Revisions {
			gen := "-"
			if r.TemplateGeneration > 0 {
				gen = strconv.FormatInt(r.TemplateGeneration, 10)
			}
			t.row(strconv.FormatInt(r.Revision, 10), r.Outcome, gen, ago(now, r.CreatedTime))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

// ago is "5m ago", or "-" for an unset time.
func ago(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return age(now, t) + " ago"
}

func timeAndAge(now time.Time, t *metav1.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05Z") + " (" + age(now, t) + " ago)"
}
