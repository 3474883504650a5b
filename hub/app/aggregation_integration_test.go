package app_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/detector"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Issue 36: a template's workloadStatus, aggregated from what members
// report, against a real apiserver and its etcd.
//
//   - A statusAggregation rule that builds 1.8 MB from two 15 KB statuses
//     (well within its cost limit): the template's status write was refused
//     by etcd ("request is too large") on every sync, so the template never
//     showed its clusters' statuses. Now workloadStatus is a stand-in that
//     says so, with WorkloadStatusIncomplete=WorkloadStatusTooLarge.
//   - A member reporting replicas "9223372036854775807" to a rule that sums
//     int(replicas): the sum overflowed and the whole workloadStatus was
//     blank. Now it is the two honest members' sum, and
//     WorkloadStatusIncomplete=StatusesLeftOut names the liar.
func TestWorkloadStatusIsBoundedAndSurvivesALiar(t *testing.T) {
	t.Parallel()
	ctx, fc := sfStartHub(t, 0, "member1", "member2", "member3")
	blobs := strings.TrimSuffix(strings.Repeat("s.status.blob, ", 60), ", ")
	for kind, rule := range map[string]string{
		"Widget": `{"x": statuses.map(s, [` + blobs + `])}`,
		"Gadget": `{"replicas": statuses.map(s, int(s.status.replicas)).sum()}`,
	} {
		if _, err := fc.ConfigV1alpha1().ResourceInterpreterCustomizations().Create(ctx, &configv1alpha1.ResourceInterpreterCustomization{
			ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind) + "s"},
			Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
				Target:         configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: kind},
				Customizations: configv1alpha1.CustomizationRules{StatusAggregation: &configv1alpha1.StatusAggregation{Expression: rule}},
			}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "custom", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "example.com/v1", Kind: "Widget"}, {APIVersion: "example.com/v1", Kind: "Gadget"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Widget", "Gadget"} {
		manifest := `{"apiVersion":"example.com/v1","kind":"` + kind + `","metadata":{"name":"` + strings.ToLower(kind) + `","namespace":"default"},"spec":{}}`
		if _, err := fc.WorkV1alpha1().ResourceTemplates("default").Create(ctx, rtOf("default", strings.ToLower(kind), manifest), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	blob := `{"blob":"` + strings.Repeat("x", 15000) + `"}`
	reports := map[string]map[string]string{
		"widget": {"member1": blob, "member2": blob, "member3": blob},
		"gadget": {"member1": `{"replicas":3}`, "member2": `{"replicas":"9223372036854775807"}`, "member3": `{"replicas":4}`},
	}
	for name, byCluster := range reports {
		kind := strings.ToUpper(name[:1]) + name[1:]
		waitReplicas(t, fc, "default", name+"-"+name, map[string]int32{"member1": 0, "member2": 0, "member3": 0})
		for cluster, status := range byCluster {
			spReport(t, ctx, fc, cluster, name+"-"+name, "example.com", kind, name, status, workv1alpha1.ResourceHealthy)
		}
	}

	// Every cluster's status reaches the template: its status writes
	// succeed.
	template := func(name string) *workv1alpha1.ResourceTemplate {
		t.Helper()
		var rt *workv1alpha1.ResourceTemplate
		waitUntil(t, name+"'s template shows its three clusters' statuses", func() (bool, error) {
			got, err := fc.WorkV1alpha1().ResourceTemplates("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			reported := 0
			for _, it := range got.Status.AggregatedStatus {
				if it.Status != nil {
					reported++
				}
			}
			rt = got
			return reported == 3, nil
		})
		return rt
	}
	incomplete := func(rt *workv1alpha1.ResourceTemplate) *metav1.Condition {
		return meta.FindStatusCondition(rt.Status.Conditions, workobjects.TemplateConditionWorkloadStatusIncomplete)
	}

	widget := template("widget")
	if ws := widget.Status.WorkloadStatus; ws == nil || len(ws.Raw) > 1<<20 || !strings.Contains(string(ws.Raw), "over the limit") {
		t.Errorf("widget workloadStatus is not the stand-in: %.200s", ws)
	}
	if c := incomplete(widget); c == nil || c.Reason != detector.ReasonWorkloadStatusTooLarge {
		t.Errorf("widget condition %+v, want WorkloadStatusTooLarge", c)
	}

	var gadget *workv1alpha1.ResourceTemplate
	waitUntil(t, "gadget's workloadStatus sums the honest members", func() (bool, error) {
		gadget = template("gadget")
		return gadget.Status.WorkloadStatus != nil && string(gadget.Status.WorkloadStatus.Raw) == `{"replicas":7}`, nil
	})
	if c := incomplete(gadget); c == nil || c.Reason != detector.ReasonStatusesLeftOut || !strings.Contains(c.Message, "member2: ") ||
		strings.Contains(c.Message, "member1") || strings.Contains(c.Message, "member3") {
		t.Errorf("gadget condition %+v, want StatusesLeftOut naming member2 only", c)
	}
}
