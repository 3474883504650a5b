package app_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/binding"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Issue 30 item 8: a Work name keeps 200 characters of the binding's name
// and 40 bits of hash, so two bindings can map to one Work. These two
// Deployments (names found by a birthday search) do: the second binding
// must not take the first one's Work over. It says so instead —
// FullyApplied=False, reason WorkConflict, naming the owner, mirrored on its
// template — and the first workload's Work keeps its manifest and owner.
func TestWorkOfAnotherBindingIsNeverWritten(t *testing.T) {
	t.Parallel()
	ctx, fc := startHub(t)
	createReadyClusters(t, ctx, fc, "member1")
	ns := "default"
	long := strings.Repeat("w", 200)
	first, second := long+"-bcd8", long+"-qlb6"
	firstBinding, secondBinding := workobjects.BindingName("Deployment", first), workobjects.BindingName("Deployment", second)
	workName := workobjects.WorkName(ns, firstBinding)
	if workobjects.WorkName(ns, secondBinding) != workName {
		t.Fatalf("the names no longer collide: %s vs %s", workName, workobjects.WorkName(ns, secondBinding))
	}

	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "long", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: first},
				{APIVersion: "apps/v1", Kind: "Deployment", Name: second}},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manifest := func(name string) string {
		return strings.Replace(nginxManifest, `"name":"nginx","labels"`, `"name":"`+name+`","labels"`, 1)
	}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "first", manifest(first)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := waitWork(t, fc, "member1", ns, firstBinding, func(o *unstructured.Unstructured) bool { return o.GetName() == first })
	owner := workobjects.WorkOwner(w)
	if owner != ns+"/"+firstBinding {
		t.Fatalf("Work owner %q", owner)
	}

	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, "second", manifest(second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the second binding says WorkConflict, naming the owner, and its template mirrors it", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, secondBinding, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != binding.ReasonWorkConflict || !strings.Contains(c.Message, firstBinding) {
			return false, nil
		}
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		m := meta.FindStatusCondition(tmpl.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
		return m != nil && m.Reason == binding.ReasonWorkConflict, nil
	})
	// Well after: the Work is still the first workload's, untouched.
	time.Sleep(2 * time.Second)
	got, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := manifestOf(t, got); o.GetName() != first || workobjects.WorkOwner(got) != owner ||
		got.Labels[workobjects.LabelBindingUID] != w.Labels[workobjects.LabelBindingUID] || got.Generation != w.Generation {
		t.Fatalf("the Work was taken over: manifest %s, owner %s, labels %v, generation %d (was %d)",
			o.GetName(), workobjects.WorkOwner(got), got.Labels, got.Generation, w.Generation)
	}
	// The first binding still reads its own Work.
	reportApplied(t, fc, got, 3)
	waitUntil(t, "the first binding FullyApplied", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, firstBinding, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha1.BindingConditionFullyApplied), nil
	})
}
