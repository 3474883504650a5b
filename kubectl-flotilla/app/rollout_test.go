package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var rolloutNow = time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)

func minutesAgo(m int) *metav1.Time {
	return &metav1.Time{Time: rolloutNow.Add(-time.Duration(m) * time.Minute)}
}

// rolloutTemplate is web in team-a carrying Deployment/web, whose revision 3
// waits for approval after its canary group; the clusters are listed out of
// order, the remaining group first.
func rolloutTemplate() *workv1alpha1.ResourceTemplate {
	return &workv1alpha1.ResourceTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)}}},
		Status: workv1alpha1.ResourceTemplateStatus{Rollout: &workv1alpha1.RolloutStatus{
			Revision: 3, StableRevision: 2, Phase: workv1alpha1.RolloutPhaseWaiting, Reason: "RolloutWaitingForApproval", Group: "canary", GroupIndex: 0,
			Message: "group canary succeeded: waiting for approval",
			Clusters: []workv1alpha1.ClusterRolloutStatus{
				{ClusterName: "member5", Revision: 2, Group: "remaining", Verdict: workv1alpha1.VerdictPending},
				{ClusterName: "member2", Revision: 3, Group: "canary", Verdict: workv1alpha1.VerdictSucceeded, UpdatedTime: minutesAgo(12), HealthySince: minutesAgo(10)},
				{ClusterName: "member4", Revision: 2, Group: "eu", Verdict: workv1alpha1.VerdictPending},
				{ClusterName: "member1", Revision: 3, Group: "canary", Verdict: workv1alpha1.VerdictSucceeded, UpdatedTime: minutesAgo(12), HealthySince: minutesAgo(11)},
				{ClusterName: "member3", Group: "eu", Verdict: workv1alpha1.VerdictPending},
			},
			Revisions: []workv1alpha1.RevisionRecord{
				{Revision: 3, TemplateGeneration: 5, Outcome: "Progressing", CreatedTime: minutesAgo(12)},
				{Revision: 2, TemplateGeneration: 4, Outcome: "Complete", CreatedTime: minutesAgo(180)},
			},
		}},
	}
}

func TestBuildRolloutViewOrdersGroupsAndClusters(t *testing.T) {
	tmpl := rolloutTemplate()
	v := BuildRolloutView(TemplateRef{Kind: "deploy", Name: "web", Namespace: "team-a"}, tmpl)
	if got := strings.Join(v.Groups, ","); got != "canary,eu,remaining" {
		t.Errorf("groups %s, want canary,eu,remaining (remaining last)", got)
	}
	var names []string
	for _, c := range v.Rollout.Clusters {
		names = append(names, c.ClusterName)
	}
	if got := strings.Join(names, ","); got != "member1,member2,member3,member4,member5" {
		t.Errorf("clusters %s", got)
	}
	// The status lists eu first, but says the rollout is in canary, the
	// first group (groupIndex 0); in eu (index 1), the order as listed.
	tmpl.Status.Rollout.Clusters[1], tmpl.Status.Rollout.Clusters[2] = tmpl.Status.Rollout.Clusters[2], tmpl.Status.Rollout.Clusters[1]
	if got := strings.Join(rolloutGroups(tmpl.Status.Rollout), ","); got != "canary,eu,remaining" {
		t.Errorf("groups %s, want canary,eu,remaining (groupIndex 0 is canary)", got)
	}
	tmpl.Status.Rollout.Group, tmpl.Status.Rollout.GroupIndex = "eu", 1
	if got := strings.Join(rolloutGroups(tmpl.Status.Rollout), ","); got != "canary,eu,remaining" {
		t.Errorf("groups %s, want canary,eu,remaining (groupIndex 1 is eu)", got)
	}
	tmpl.Status.Rollout.Group, tmpl.Status.Rollout.GroupIndex = "remaining", 2
	if got := strings.Join(rolloutGroups(tmpl.Status.Rollout), ","); got != "eu,canary,remaining" {
		t.Errorf("groups %s, want eu,canary,remaining (as listed)", got)
	}
	if tmpl.Status.Rollout.Clusters[0].ClusterName != "member5" {
		t.Errorf("BuildRolloutView sorted the template's own status")
	}
	if v.Template.TemplateKind != "ResourceTemplate" || v.Template.TemplateName != "web" || v.Resource != "Deployment/web" {
		t.Errorf("view %+v", v)
	}
}

func TestPrintRollout(t *testing.T) {
	tmpl := rolloutTemplate()
	tmpl.Annotations = map[string]string{workv1alpha1.AnnotationRolloutApprove: "2/eu"}
	tmpl.Status.Rollout.Analysis = &workv1alpha1.AnalysisStatus{Group: "canary", Phase: workv1alpha1.AnalysisSuccessful, Successes: 3, Message: "0.002"}
	var out bytes.Buffer
	o := &Options{Out: &out, Now: func() time.Time { return rolloutNow }}
	if err := o.printRollout(BuildRolloutView(TemplateRef{TemplateKind: "ResourceTemplate", TemplateName: "web", Namespace: "team-a"}, tmpl)); err != nil {
		t.Fatal(err)
	}
	want := `ResourceTemplate:  web (namespace team-a)
Resource:          Deployment/web
Revision:          3
Stable revision:   2
Phase:             Waiting (RolloutWaitingForApproval)
Group:             canary (group 1 of 3: canary, eu, remaining)
Message:           group canary succeeded: waiting for approval
Failures:          0
Analysis:          group canary: Successful (3 successful, 0 failed, 0 inconclusive): 0.002
Approved:          2/eu (rollout.flotilla.io/approve): revision 2's, not the current one

CLUSTER   REVISION   GROUP       VERDICT     UPDATED   HEALTHY-SINCE   MESSAGE
member1   3          canary      Succeeded   12m ago   11m ago         <none>
member2   3          canary      Succeeded   12m ago   10m ago         <none>
member3   -          eu          Pending     -         -               <none>
member4   2          eu          Pending     -         -               <none>
member5   2          remaining   Pending     -         -               <none>

Revisions (newest first):
REVISION   OUTCOME       TEMPLATE-GENERATION   CREATED
3          Progressing   5                     12m ago
2          Complete      4                     3h ago
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}

	// A halted revision: when, how many failures, and the failed cluster's
	// message — escaped, as the hub copied it from a member's report.
	tmpl = rolloutTemplate()
	rs := tmpl.Status.Rollout
	rs.Phase, rs.Reason, rs.Group, rs.GroupIndex, rs.Failures, rs.HaltedTime = workv1alpha1.RolloutPhaseHalted, "", "eu", 1, 1, minutesAgo(2)
	rs.Message = "member3 failed\x1b[2J"
	rs.Clusters[4].Verdict, rs.Clusters[4].Revision, rs.Clusters[4].Message = workv1alpha1.VerdictFailed, 3, "not Healthy for 10m\r\x07"
	out.Reset()
	if err := o.printRollout(BuildRolloutView(TemplateRef{}, tmpl)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Phase:             Halted", "Group:             eu (group 2 of 3: canary, eu, remaining)",
		"Halted:            2026-11-24T07:58:00Z (2m ago)", "Failures:          1", `member3 failed\x1b[2J`,
		`member3   3          eu          Failed      -         -               not Healthy for 10m\x0d\x07`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("halted output lacks %q:\n%s", want, out.String())
		}
	}
	for i, r := range out.String() {
		if r != '\n' && r < 0x20 {
			t.Fatalf("output has %U at byte %d: %q", r, i, out.String())
		}
	}

	// No rollout state yet: said so, as a table and as JSON.
	tmpl = rolloutTemplate()
	tmpl.Status.Rollout = nil
	out.Reset()
	if err := o.printRollout(BuildRolloutView(TemplateRef{}, tmpl)); err != nil {
		t.Fatal(err)
	}
	want = `ResourceTemplate:  web (namespace team-a)
Resource:          Deployment/web
Rollout:           no rollout state yet: every change goes to all clusters at once unless its policy has a rolloutStrategy
`
	if out.String() != want {
		t.Errorf("output without rollout state:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	o.Output = "json"
	if err := o.printRollout(BuildRolloutView(TemplateRef{}, tmpl)); err != nil {
		t.Fatal(err)
	}
	var back RolloutView
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.Rollout != nil || back.Problem != noRolloutState {
		t.Errorf("json %v %+v\n%s", err, back, out.String())
	}
}

func TestChooseApproval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   func(*workv1alpha1.ResourceTemplate)
		group    string
		want     string
		already  bool
		notes    []string
		errParts []string
	}{
		{name: "the group it waits in", want: "3/canary", notes: []string{"waiting in group canary: the next group may start"}},
		{name: "a later group", group: "eu", want: "3/eu", notes: []string{"it will not wait after the groups up to eu"}},
		{name: "the remaining group", group: "remaining", want: "3/remaining"},
		{name: "an earlier group", group: "canary", want: "3/canary", notes: []string{"Progressing in group eu, after canary: this approval covers none"},
			change: func(t *workv1alpha1.ResourceTemplate) {
				t.Status.Rollout.Phase, t.Status.Rollout.Group, t.Status.Rollout.GroupIndex = workv1alpha1.RolloutPhaseProgressing, "eu", 1
			}},
		{name: "while its group progresses", want: "3/canary", notes: []string{"Progressing in group canary: once the group succeeds"},
			change: func(t *workv1alpha1.ResourceTemplate) { t.Status.Rollout.Phase = workv1alpha1.RolloutPhaseProgressing }},
		{name: "the fleet guard holds it", want: "3/canary", notes: []string{"fleet guard holds it: no approval lifts that"},
			change: func(t *workv1alpha1.ResourceTemplate) { t.Status.Rollout.Reason = "FleetGuardHolds" }},
		{name: "an inconclusive analysis is accepted", want: "3/canary", notes: []string{"inconclusive analysis of group canary is accepted"},
			change: func(t *workv1alpha1.ResourceTemplate) {
				t.Status.Rollout.Analysis = &workv1alpha1.AnalysisStatus{Group: "canary", Phase: workv1alpha1.AnalysisInconclusive}
			}},
		{name: "halted: approval does not resume", want: "3/canary", notes: []string{"Halted: an approval does not resume it"},
			change: func(t *workv1alpha1.ResourceTemplate) { t.Status.Rollout.Phase = workv1alpha1.RolloutPhaseHalted }},
		{name: "an older revision's approval is replaced", want: "3/canary",
			change: func(t *workv1alpha1.ResourceTemplate) {
				t.Annotations = map[string]string{workv1alpha1.AnnotationRolloutApprove: "2/remaining"}
			}},
		{name: "already approved", want: "3/canary", already: true,
			change: func(t *workv1alpha1.ResourceTemplate) {
				t.Annotations = map[string]string{workv1alpha1.AnnotationRolloutApprove: "3/canary"}
			}},
		{name: "would withdraw a wider approval", errParts: []string{"already approved through group eu", "withdraw", "kubectl annotate resourcetemplate web rollout.flotilla.io/approve-"},
			change: func(t *workv1alpha1.ResourceTemplate) {
				t.Annotations = map[string]string{workv1alpha1.AnnotationRolloutApprove: "3/eu"}
			}},
		{name: "no such group", group: "us", errParts: []string{`no group "us"`, "canary, eu, remaining"}},
		{name: "complete", errParts: []string{"Complete", "nothing to approve"},
			change: func(t *workv1alpha1.ResourceTemplate) { t.Status.Rollout.Phase = workv1alpha1.RolloutPhaseComplete }},
		{name: "no rollout state", errParts: []string{"ResourceTemplate team-a/web has no rollout state yet"},
			change: func(t *workv1alpha1.ResourceTemplate) { t.Status.Rollout = nil }},
		{name: "in no group", errParts: []string{"in no group", "pass --group"},
			change: func(t *workv1alpha1.ResourceTemplate) { t.Status.Rollout.Group = "" }},
		{name: "a Progressive rollout has no groups", group: "canary", errParts: []string{"clusters are in no group"},
			change: func(t *workv1alpha1.ResourceTemplate) {
				t.Status.Rollout.Group = ""
				for i := range t.Status.Rollout.Clusters {
					t.Status.Rollout.Clusters[i].Group = ""
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := rolloutTemplate()
			if tc.change != nil {
				tc.change(tmpl)
			}
			a, err := ChooseApproval(tmpl, tc.group)
			if len(tc.errParts) > 0 {
				if err == nil {
					t.Fatalf("approved %+v, want a refusal", a)
				}
				for _, p := range tc.errParts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error %q lacks %q", err, p)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Value != tc.want || a.AlreadyApproved != tc.already || a.Revision != 3 {
				t.Errorf("approval %+v, want %s (already %v)", a, tc.want, tc.already)
			}
			notes := strings.Join(a.Notes, "\n")
			for _, n := range tc.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q lack %q", notes, n)
				}
			}
		})
	}
}

func TestChooseResume(t *testing.T) {
	halted := func(phase workv1alpha1.RolloutPhase, annotation, resumed string) *workv1alpha1.ResourceTemplate {
		tmpl := rolloutTemplate()
		tmpl.Status.Rollout.Phase, tmpl.Status.Rollout.Group, tmpl.Status.Rollout.GroupIndex = phase, "eu", 1
		tmpl.Status.Rollout.Resumed = resumed
		if annotation != "" {
			tmpl.Annotations = map[string]string{workv1alpha1.AnnotationRolloutResume: annotation}
		}
		return tmpl
	}
	for _, tc := range []struct {
		name    string
		tmpl    *workv1alpha1.ResourceTemplate
		want    string
		already bool
		errPart string
	}{
		{name: "halted", tmpl: halted(workv1alpha1.RolloutPhaseHalted, "", ""), want: "3"},
		{name: "rolled back", tmpl: halted(workv1alpha1.RolloutPhaseRolledBack, "", ""), want: "3"},
		{name: "rolling back", tmpl: halted(workv1alpha1.RolloutPhaseRollingBack, "", ""), want: "3"},
		{name: "an older revision's resume", tmpl: halted(workv1alpha1.RolloutPhaseHalted, "2", "2"), want: "3"},
		{name: "asked, not honoured yet", tmpl: halted(workv1alpha1.RolloutPhaseHalted, "3", ""), want: "3", already: true},
		{name: "asked with a token, not honoured yet", tmpl: halted(workv1alpha1.RolloutPhaseHalted, "3/again", "3"), want: "3/again", already: true},
		{name: "resumed before, halted again", tmpl: halted(workv1alpha1.RolloutPhaseHalted, "3", "3"), want: "3/20261124T080000Z"},
		{name: "resumed before, annotation removed since", tmpl: halted(workv1alpha1.RolloutPhaseHalted, "", "3"), want: "3/20261124T080000Z"},
		{name: "resumed with a token before", tmpl: halted(workv1alpha1.RolloutPhaseHalted, "3/20261124T080000Z", "3/20261124T080000Z"),
			want: "3"},
		{name: "waiting", tmpl: rolloutTemplate(), errPart: "revision 3 of ResourceTemplate team-a/web is Waiting, not Halted"},
		{name: "complete", tmpl: halted(workv1alpha1.RolloutPhaseComplete, "", ""), errPart: "is Complete, not Halted"},
		{name: "no rollout state", tmpl: &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}},
			errPart: "ResourceTemplate team-a/web has no rollout state yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ChooseResume(tc.tmpl, rolloutNow)
			if tc.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errPart) {
					t.Errorf("resume %+v, %v; want a refusal saying %q", r, err, tc.errPart)
				}
				return
			}
			if err != nil || r.Value != tc.want || r.AlreadyRequested != tc.already || r.Revision != 3 || r.Group != "eu" {
				t.Errorf("resume %+v %v, want %s (already %v)", r, err, tc.want, tc.already)
			}
		})
	}
}

func TestAnnotationPatch(t *testing.T) {
	p, err := annotationPatch(workv1alpha1.AnnotationRolloutApprove, "3/canary")
	if err != nil || string(p) != `{"metadata":{"annotations":{"rollout.flotilla.io/approve":"3/canary"}}}` {
		t.Errorf("patch %s %v", p, err)
	}
}

func TestTemplateCarrying(t *testing.T) {
	tmpl := func(name, manifest string) *workv1alpha1.ResourceTemplate {
		return &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
			Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
	}
	web := tmpl("web", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)
	svc := tmpl("web-svc", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"}}`)
	broken := tmpl("broken", `not json`)
	elsewhere := tmpl("other-ns", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api","namespace":"team-b"}}`)
	all := []*workv1alpha1.ResourceTemplate{broken, svc, web, elsewhere}
	if got, err := templateCarrying(all, TemplateRef{Kind: "deployment", Name: "web", Namespace: "team-a"}); err != nil || got != web {
		t.Errorf("deployment/web: %v %v", got, err)
	}
	if got, err := templateCarrying(all, TemplateRef{Kind: "Service", Name: "web", Namespace: "team-a"}); err != nil || got != svc {
		t.Errorf("Service/web: %v %v", got, err)
	}
	if _, err := templateCarrying(all, TemplateRef{Kind: "Deployment", Name: "api", Namespace: "team-a"}); err == nil ||
		err.Error() != "no ResourceTemplate carries Deployment/api in namespace team-a" {
		t.Errorf("Deployment/api of another namespace: %v", err)
	}
	twice := tmpl("web-copy", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)
	if _, err := templateCarrying(append(all, twice), TemplateRef{Kind: "Deployment", Name: "web", Namespace: "team-a"}); err == nil ||
		!strings.Contains(err.Error(), "several templates (web, web-copy)") {
		t.Errorf("carried twice: %v", err)
	}
}

// A refusal quotes the status, which the hub wrote from others' reports.
func TestRolloutRefusalIsPrintable(t *testing.T) {
	tmpl := rolloutTemplate()
	if _, err := ChooseApproval(tmpl, "evil\x1b]52;c;aGk=\x07"); err == nil || strings.ContainsRune(printableError(err).Error(), 0x1b) {
		t.Errorf("refusal %q", err)
	}
	tmpl.Status.Rollout.Phase = "Weird\x1b[2J"
	err := printableError(func() error { _, err := ChooseResume(tmpl, rolloutNow); return err }())
	if strings.ContainsRune(err.Error(), 0x1b) || !strings.Contains(err.Error(), `Weird\x1b[2J`) {
		t.Errorf("refusal %q", err)
	}
}
