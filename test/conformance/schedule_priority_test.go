package conformance

import (
	"context"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/detector"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Karmada's schedulePriority cases (issue 39): a binding carries the value
// of the PriorityClass its policy names; a policy naming a class that does
// not exist creates no binding. Karmada reads the class from its own
// apiserver, Flotilla from the hub's host cluster; the ports create it
// there. Karmada's "does not exist" case only waits (Consistently) for no
// binding; the port first waits for the template to say why
// (PriorityClassNotFound), so the absence is not read before the hub has
// looked, and then creates the class, which binds the template.

// priorityClass creates a PriorityClass named for the case, deleted with it.
func (c *tc) priorityClass(name string, value int32) string {
	c.t.Helper()
	name += "-" + c.ns
	if _, err := c.kube.SchedulingV1().PriorityClasses().Create(c.ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value},
		metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		_ = c.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func prioritySpec(name string, priorityClass string, clusters ...string) policyv1alpha1.PropagationSpec {
	return policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", name),
		Placement:        policyv1alpha1.Placement{ClusterAffinity: onClusters(clusters...)},
		SchedulePriority: &policyv1alpha1.SchedulePriority{PriorityClassSource: policyv1alpha1.KubePriorityClass, PriorityClassName: priorityClass}}
}

// Karmada: test/e2e/suites/base/schedule_priority_test.go,
// Describe("[SchedulePriority] priority based resource scheduling"),
// Context("With KubePriorityClass source"), When("priorityclass exists"),
// It("ResourceBinding should inherit priority from propagationPolicy"):
// a PriorityClass of value 1000, a policy naming it, a Deployment; the
// binding's spec.schedulePriority.priority is 1000.
func TestKarmada_SchedulePriority_ResourceBindingInheritsPriorityFromPolicy(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(1)
	class := c.priorityClass("test-priority", 1000)
	c.policy("nginx", prioritySpec("nginx", class, members...))
	binding := c.template(deployment("nginx", 3))
	c.eventually("binding with priority 1000", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && rb.Spec.SchedulePriority != nil && rb.Spec.SchedulePriority.Priority == 1000, nil
	})
	c.waitPlacedOn(binding, members...)
}

// Karmada: the same file, When("priorityclass does not exist"),
// It("ResourceBinding should not be created"): a policy naming
// non-existent-priority-class and a Deployment; no binding. Flotilla says
// so on the template (Propagated=False, PriorityClassNotFound) and binds it
// once the class exists.
func TestKarmada_SchedulePriority_ResourceBindingNotCreatedWithoutPriorityClass(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(1)
	missing := "non-existent-priority-class-" + c.ns
	c.policy("nginx", prioritySpec("nginx", missing, members...))
	binding := c.template(deployment("nginx", 3))
	c.eventually("template says PriorityClassNotFound", func() (bool, error) {
		rt, err := c.fc.WorkV1alpha1().ResourceTemplates(c.ns).Get(c.ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(rt.Status.Conditions, workobjects.TemplateConditionPropagated)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == detector.ReasonPriorityClassNotFound, nil
	})
	if rb := c.binding(binding); rb != nil {
		t.Fatalf("binding %s created although PriorityClass %s does not exist", binding, missing)
	}
	c.waitEvent(detector.ReasonPriorityClassNotFound, missing)

	if _, err := c.kube.SchedulingV1().PriorityClasses().Create(c.ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: missing}, Value: 42},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), missing, metav1.DeleteOptions{})
	})
	c.eventually("binding with priority 42 once the class exists", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && rb.Spec.SchedulePriority != nil && rb.Spec.SchedulePriority.Priority == 42, nil
	})
	c.waitPlacedOn(binding, members...)
}
