/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package detector

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// A template whose pod template asks for a quantity out of range
// (issue 36): the detector says InvalidQuantity on the template, naming
// the field, with a Warning, within a bounded time (on c1a0803 the sync
// of "1e-10000000" took seconds and wrote cpu 1n into the binding;
// "1e10000000" was written as is, for the scheduler to stall on), and
// keeps the existing binding exactly as it was.
func TestTemplateWithQuantityOutOfRange(t *testing.T) {
	for _, cpu := range []string{"1e-10000000", "1e10000000"} {
		t.Run(cpu, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			manifest := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"template":{"spec":{"containers":[` +
				`{"name":"a","image":"i","resources":{"requests":{"cpu":"` + cpu + `"}}}]}}}}`
			tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "t1", Generation: 2},
				Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
			policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}}
			// The binding of the template's previous generation.
			binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "web-deployment", Namespace: "default",
				Labels:          workobjects.PolicyLabels(claimLabels(PolicyRef{Namespace: "default", Name: "web"})),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}},
				Spec: workv1alpha1.ResourceBindingSpec{
					Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web", UID: "t1"},
					Replicas: 2, Placement: &policyv1alpha1.Placement{},
					ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					Clusters:            []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 2}}}}
			client := fake.NewSimpleClientset(tmpl, policy, binding)
			factory := flotillainformers.NewSharedInformerFactory(client, 0)
			recorder := record.NewFakeRecorder(10)
			c := NewController(client, factory, recorder, nil)
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())

			done := make(chan error, 1)
			go func() { done <- c.sync(ctx, "default/web") }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("sync: %v; want the template's condition to say it, not a retry", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("sync not returned within 5s")
			}

			got, err := client.WorkV1alpha1().ResourceTemplates("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p := meta.FindStatusCondition(got.Status.Conditions, workobjects.TemplateConditionPropagated)
			if p == nil || p.Status != metav1.ConditionFalse || p.Reason != ReasonInvalidQuantity ||
				!strings.Contains(p.Message, `spec.template.spec.containers[0].resources.requests.cpu: "`+cpu+`": out of range`) ||
				!strings.Contains(p.Message, "kept as it was") {
				t.Fatalf("Propagated = %+v; want False %s naming the field and keeping the binding", p, ReasonInvalidQuantity)
			}
			select {
			case e := <-recorder.Events:
				if !strings.HasPrefix(e, "Warning ") || !strings.Contains(e, cpu) {
					t.Errorf("event %q, want a Warning naming the quantity", e)
				}
			default:
				t.Error("no event")
			}
			after, err := client.WorkV1alpha1().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the binding: %v; want it kept", err)
			}
			if !apiequality.Semantic.DeepEqual(after.Spec, binding.Spec) {
				t.Errorf("binding spec changed:\n%+v\nwant\n%+v", after.Spec, binding.Spec)
			}
		})
	}
}

// A binding stored before its CRD bounded quantities, with a requirement
// of 1e100000000: a fixed template replaces it at once, without comparing
// the two (Quantity.Cmp of it and 100m computes 10^N: ~1 s for 1e10000000,
// far longer for this one).
func TestStoredUnboundedRequirementIsReplaced(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	manifest := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"template":{"spec":{"containers":[` +
		`{"name":"a","image":"i","resources":{"requests":{"cpu":"100m"}}}]}}}}`
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "t1", Generation: 3},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}}}}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}}
	binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "web-deployment", Namespace: "default",
		Labels:          workobjects.PolicyLabels(claimLabels(PolicyRef{Namespace: "default", Name: "web"})),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}},
		Spec: workv1alpha1.ResourceBindingSpec{
			Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web", UID: "t1"},
			Replicas: 2, Placement: &policyv1alpha1.Placement{},
			ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e100000000")}}}}
	client := fake.NewSimpleClientset(tmpl, policy, binding)
	factory := flotillainformers.NewSharedInformerFactory(client, 0)
	c := NewController(client, factory, record.NewFakeRecorder(10), nil)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.sync(ctx, "default/web") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sync not returned within 5s")
	}
	after, err := client.WorkV1alpha1().ResourceBindings("default").Get(ctx, "web-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Spec.ReplicaRequirements.ResourceRequest.Cpu().String(); got != "100m" {
		t.Errorf("requirement %s, want 100m", got)
	}
}
