package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/kubectl-flotilla/app"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// kubectl flotilla rollout against a real apiserver, without the hub (the
// test writes status.rollout itself, through the status subresource, as
// the hub mirrors it from the binding). A tenant who may only get, list and
// patch ResourceTemplates in its namespace — nothing on bindings — reads
// the rollout and approves and resumes it; the annotations land on the
// template and its status is left alone.
func TestKubectlFlotillaRollout(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	ns := "default"

	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "templates"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{workv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"resourcetemplates"},
			Verbs: []string{"get", "list", "patch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-templates"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "templates"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantConfig := env.UserConfig(t, "tenant")
	if _, err := flotillaclient.NewForConfigOrDie(tenantConfig).WorkV1alpha1().ResourceBindings(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant may read bindings (%v): the test would not show rollout needs no permission on them", err)
	}
	tenant, admin := env.KubeconfigFor(t, tenantConfig), env.KubeconfigFor(t, env.Config)

	run := func(kubeconfig string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := app.NewCommand(&out, &errOut)
		cmd.SetArgs(append(args, "--kubeconfig", kubeconfig))
		err := cmd.ExecuteContext(ctx)
		t.Logf("$ kubectl flotilla %s\n%s%s(error: %v)", strings.Join(args, " "), out.String(), errOut.String(), err)
		return out.String(), err
	}
	mustRun := func(kubeconfig string, args ...string) string {
		t.Helper()
		out, err := run(kubeconfig, args...)
		if err != nil {
			t.Fatalf("kubectl flotilla %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	refused := func(kubeconfig, want string, args ...string) {
		t.Helper()
		if _, err := run(kubeconfig, args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("kubectl flotilla %s: %v, want a refusal saying %q", strings.Join(args, " "), err, want)
		}
	}
	contains := func(what, out string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, out)
			}
		}
	}

	tmpl, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(pluginTestManifest)}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No rollout state yet.
	contains("rollout status without status.rollout", mustRun(tenant, "rollout", "status", "web"), "no rollout state yet: every change goes to all clusters at once")
	refused(tenant, "no rollout state yet", "rollout", "approve", "web")

	// The hub's state: revision 2 waits for approval after its canary group.
	at := func(ago time.Duration) *metav1.Time {
		return &metav1.Time{Time: time.Now().Add(-ago).Truncate(time.Second)}
	}
	setRollout := func(rs *workv1alpha1.RolloutStatus) {
		t.Helper()
		cur, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, tmpl.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.Rollout = rs
		if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rollout := &workv1alpha1.RolloutStatus{Revision: 2, StableRevision: 1, Phase: workv1alpha1.RolloutPhaseWaiting, Reason: "RolloutWaitingForApproval", Group: "canary",
		Message: "revision 2 succeeded in group canary and waits for approval: kubectl flotilla rollout approve --group canary",
		Clusters: []workv1alpha1.ClusterRolloutStatus{
			{ClusterName: "member3", Revision: 1, Group: "prod", Verdict: workv1alpha1.VerdictPending},
			{ClusterName: "member1", Revision: 2, Group: "canary", Verdict: workv1alpha1.VerdictSucceeded, UpdatedTime: at(6 * time.Minute), HealthySince: at(5 * time.Minute)},
			{ClusterName: "member2", Revision: 1, Group: "prod", Verdict: workv1alpha1.VerdictPending},
		},
		Revisions: []workv1alpha1.RevisionRecord{
			{Revision: 2, TemplateGeneration: 2, Outcome: "Progressing", CreatedTime: at(6 * time.Minute)},
			{Revision: 1, TemplateGeneration: 1, Outcome: "Complete", CreatedTime: at(2 * time.Hour)},
		}}
	setRollout(rollout)

	out := mustRun(tenant, "rollout", "status", "web")
	contains("rollout status", out, "ResourceTemplate:  web (namespace default)", "Resource:          Deployment/nginx", "Revision:          2",
		"Stable revision:   1", "Phase:             Waiting (RolloutWaitingForApproval)", "Group:             canary (group 1 of 2: canary, prod)",
		"CLUSTER   REVISION   GROUP    VERDICT     UPDATED   HEALTHY-SINCE   MESSAGE", "member1   2          canary   Succeeded   6m ago    5m ago",
		"Revisions (newest first):", "1          Complete")
	if i, j := strings.Index(out, "member1"), strings.Index(out, "member2"); i > j || j > strings.Index(out, "member3") {
		t.Errorf("clusters not by group, then name:\n%s", out)
	}
	// By the object it carries (found among the namespace's templates).
	contains("rollout status deploy/nginx", mustRun(tenant, "rollout", "status", "deploy/nginx", "-n", ns), "ResourceTemplate:  web", "Phase:             Waiting")
	var v app.RolloutView
	if err := json.Unmarshal([]byte(mustRun(tenant, "rollout", "status", "web", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Rollout == nil || v.Rollout.Revision != 2 || len(v.Rollout.Clusters) != 3 || v.Rollout.Clusters[0].ClusterName != "member1" ||
		strings.Join(v.Groups, ",") != "canary,prod" {
		t.Errorf("rollout status -o json: %+v", v)
	}

	refused(tenant, `no group "us"`, "rollout", "approve", "web", "--group", "us")
	refused(tenant, "is Waiting, not Halted", "rollout", "resume", "web")
	contains("rollout approve", mustRun(tenant, "rollout", "approve", "web"),
		"ResourceTemplate default/web: approved revision 2 through group canary (rollout.flotilla.io/approve=2/canary)",
		"the rollout was waiting in group canary: the next group may start")
	annotations := func() map[string]string {
		t.Helper()
		cur, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, tmpl.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status.Rollout == nil || cur.Status.Rollout.Revision != 2 {
			t.Errorf("the annotation changed the status: %+v", cur.Status.Rollout)
		}
		return cur.Annotations
	}
	if got := annotations()[workv1alpha1.AnnotationRolloutApprove]; got != "2/canary" {
		t.Errorf("approve annotation %q, want 2/canary", got)
	}
	contains("rollout approve again", mustRun(tenant, "rollout", "approve", "web"), "already approved through group canary", "nothing written")
	contains("rollout status after approve", mustRun(tenant, "rollout", "status", "web"), "Approved:          2/canary (rollout.flotilla.io/approve)")

	// prod fails: the revision halts; the tenant resumes it.
	rollout.Phase, rollout.Reason, rollout.Group, rollout.GroupIndex, rollout.Failures, rollout.HaltedTime =
		workv1alpha1.RolloutPhaseHalted, "RolloutHalted", "prod", 1, 1, at(time.Minute)
	rollout.Message = "1 cluster(s) failed, more than maxFailures 0: member2"
	rollout.Clusters[2] = workv1alpha1.ClusterRolloutStatus{ClusterName: "member2", Revision: 2, Group: "prod", Verdict: workv1alpha1.VerdictFailed,
		UpdatedTime: at(3 * time.Minute), Message: "not Healthy within progressDeadline 2m0s: Progressing"}
	setRollout(rollout)
	contains("rollout status halted", mustRun(tenant, "rollout", "status", "web"), "Phase:             Halted (RolloutHalted)", "Failures:          1",
		"Halted:            ", "member2   2          prod     Failed", "not Healthy within progressDeadline")
	contains("rollout resume", mustRun(tenant, "rollout", "resume", "deploy/nginx"),
		"ResourceTemplate default/web: resumed revision 2 (halted in group prod): wrote rollout.flotilla.io/resume=2;")
	if a := annotations(); a[workv1alpha1.AnnotationRolloutResume] != "2" || a[workv1alpha1.AnnotationRolloutApprove] != "2/canary" {
		t.Errorf("annotations after resume %v", a)
	}
	// The hub honoured it (status.rollout.resumed), and the revision
	// halted again: the same value would not resume it twice.
	rollout.Resumed, rollout.HaltedTime = "2", at(0)
	setRollout(rollout)
	contains("rollout status halted again", mustRun(tenant, "rollout", "status", "web"), "Resume:            2 (rollout.flotilla.io/resume): honoured")
	contains("rollout resume again", mustRun(tenant, "rollout", "resume", "web"), "resumed revision 2 (halted in group prod): wrote rollout.flotilla.io/resume=2/")
	if a := annotations()[workv1alpha1.AnnotationRolloutResume]; !strings.HasPrefix(a, "2/") {
		t.Errorf("resume annotation after a second halt %q, want 2/<time>", a)
	}

	rollout.Phase, rollout.Group, rollout.HaltedTime = workv1alpha1.RolloutPhaseComplete, "", nil
	setRollout(rollout)
	refused(tenant, "is Complete: there is nothing to approve", "rollout", "approve", "web", "--group", "prod")

	// A ClusterResourceTemplate (the admin's), named as such.
	crt, err := fc.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, &workv1alpha1.ClusterResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crt.Status.Rollout = &workv1alpha1.RolloutStatus{Revision: 4, StableRevision: 3, Phase: workv1alpha1.RolloutPhaseHalted, Failures: 1}
	if _, err := fc.WorkV1alpha1().ClusterResourceTemplates().UpdateStatus(ctx, crt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	contains("rollout status of a ClusterResourceTemplate", mustRun(admin, "rollout", "status", "namespace/team-a", "--cluster-scoped"),
		"ClusterResourceTemplate:  team-a", "Phase:                    Halted", "No cluster in the rollout yet.")
	contains("rollout resume of a ClusterResourceTemplate", mustRun(admin, "rollout", "resume", "clusterresourcetemplate/team-a"),
		"ClusterResourceTemplate team-a: resumed revision 4: wrote rollout.flotilla.io/resume=4;")
	if got, err := fc.WorkV1alpha1().ClusterResourceTemplates().Get(ctx, "team-a", metav1.GetOptions{}); err != nil ||
		got.Annotations[workv1alpha1.AnnotationRolloutResume] != "4" {
		t.Errorf("ClusterResourceTemplate annotations %v %v", got.Annotations, err)
	}
	refused(tenant, "forbidden", "rollout", "status", "team-a", "--cluster-scoped")
}
