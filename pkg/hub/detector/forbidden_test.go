package detector

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/forbidden"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func TestMayHold(t *testing.T) {
	inFlightBinding := &workv1alpha1.ResourceBinding{} // not scheduled yet
	propagated := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: workobjects.TemplateConditionPropagated, Status: status, Reason: reason}}
	}
	for _, c := range []struct {
		name    string
		shown   []metav1.Condition
		status  metav1.ConditionStatus
		binding *workv1alpha1.ResourceBinding
		want    bool
	}{
		{"new template, binding in flight", nil, metav1.ConditionTrue, inFlightBinding, true},
		{"already propagated, binding in flight", propagated(metav1.ConditionTrue, ReasonPolicyMatched), metav1.ConditionTrue, inFlightBinding, true},
		{"shows NoMatchingPolicy: replaced at once", propagated(metav1.ConditionFalse, ReasonNoMatchingPolicy), metav1.ConditionTrue, inFlightBinding, false},
		{"shows PermissionDenied: replaced at once", propagated(metav1.ConditionFalse, ReasonPermissionDenied), metav1.ConditionTrue, inFlightBinding, false},
		{"a False status is never held", nil, metav1.ConditionFalse, inFlightBinding, false},
		{"a settled binding is never held", nil, metav1.ConditionTrue, nil, false},
	} {
		if got := mayHold(c.shown, c.status, c.binding); got != c.want {
			t.Errorf("%s: mayHold = %v, want %v", c.name, got, c.want)
		}
	}
}

// The detector's side of a refused binding status write (issue 29): the
// template, which said NoMatchingPolicy before its policy came, says
// PermissionDenied naming the verb, not NoMatchingPolicy and not a status
// held back while the binding waits forever; once a write succeeds it says
// PolicyMatched at once.
func TestRefusedBindingStatusIsSaidOnTheTemplate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default", UID: "t1", Generation: 1},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"b"}}`)}}},
		Status: workv1alpha1.ResourceTemplateStatus{Conditions: []metav1.Condition{{Type: workobjects.TemplateConditionPropagated,
			Status: metav1.ConditionFalse, Reason: ReasonNoMatchingPolicy, Message: "no policy", LastTransitionTime: metav1.Now()}}}}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}}}}
	client := fake.NewSimpleClientset(tmpl, policy)
	factory := flotillainformers.NewSharedInformerFactory(client, 0)
	denials := forbidden.NewDenials()
	c := NewController(client, factory, record.NewFakeRecorder(10), nil).WithBindingStatusDenials(denials)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	const bindingKey = "default/settings-configmap"
	denials.Refused(bindingKey, forbidden.Denial{Verb: "patch", Resource: "resourcebindings/status", Group: "work.flotilla.io", Namespace: "default"})
	if err := c.sync(ctx, "default/settings"); err != nil {
		t.Fatal(err)
	}
	propagated := func() *metav1.Condition {
		t.Helper()
		got, err := client.WorkV1alpha1().ResourceTemplates("default").Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, workobjects.TemplateConditionPropagated)
	}
	if p := propagated(); p.Status != metav1.ConditionFalse || p.Reason != ReasonPermissionDenied ||
		!strings.Contains(p.Message, "patch resourcebindings/status") || !strings.Contains(p.Message, "PropagationPolicy default/settings") {
		t.Fatalf("Propagated = %+v, want False PermissionDenied naming the policy and patch resourcebindings/status", p)
	}

	// The binding is cached by now; a successful status write clears the
	// denial and the template is queued again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := c.bindings.Get(bindingKey); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the binding never reached the cache")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The templates' cache too must show the PermissionDenied status.
	for {
		cached, err := c.templates.Get("default/settings")
		if err == nil && meta.FindStatusCondition(cached.Status.Conditions, workobjects.TemplateConditionPropagated).Reason == ReasonPermissionDenied {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the template cache never caught up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	denials.Allowed(bindingKey)
	if n := c.queue.Len(); n != 1 {
		t.Errorf("queue length %d after the denial went, want the template queued", n)
	}
	if err := c.sync(ctx, "default/settings"); err != nil {
		t.Fatal(err)
	}
	// The binding has no status yet (in flight): a template showing
	// Propagated=False is still written at once.
	if p := propagated(); p.Status != metav1.ConditionTrue || p.Reason != ReasonPolicyMatched {
		t.Fatalf("Propagated = %+v, want True PolicyMatched at once", p)
	}
}
