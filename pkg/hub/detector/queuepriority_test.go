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
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

func TestTemplateWorkPriority(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name  string
		tmpl  workv1alpha1.ResourceTemplate
		bound bool
		want  int32
	}{
		{"new, no binding", workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Generation: 1}}, false, priorityWork},
		{"binding deleted by hand", workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: workv1alpha1.ResourceTemplateStatus{ObservedGeneration: 3}}, false, priorityWork},
		{"being deleted", workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Generation: 1, DeletionTimestamp: &now}}, true, priorityWork},
		{"changed since shown", workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Generation: 4},
			Status: workv1alpha1.ResourceTemplateStatus{ObservedGeneration: 3}}, true, priorityWork},
		{"bound, first status held", workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Generation: 1}}, true, priorityStatus},
		{"bound and shown", workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Status: workv1alpha1.ResourceTemplateStatus{ObservedGeneration: 2}}, true, priorityStatus},
	} {
		if got := templateWorkPriority(&tc.tmpl, tc.bound); got != tc.want {
			t.Errorf("%s: priority %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The detector's own queue hands out a new template before the status
// refreshes of bound ones that were queued earlier, and keys of one
// priority in the order they came.
func TestDetectorQueueTakesNewTemplatesFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bound := func(name string) (*workv1alpha1.ResourceTemplate, *workv1alpha1.ResourceBinding) {
		tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 1}}
		rb := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tmpl, workv1alpha1.SchemeGroupVersion.WithKind("ResourceTemplate"))}}}
		return tmpl, rb
	}
	t1, b1 := bound("old-1")
	t2, b2 := bound("old-2")
	fresh := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "default", UID: "uid-fresh", Generation: 1}}
	client := fake.NewSimpleClientset(t1, b1, t2, b2, fresh)
	factory := flotillainformers.NewSharedInformerFactory(client, 0)
	c := NewController(client, factory, record.NewFakeRecorder(10), nil)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// Drain what the informers queued at start.
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		c.queue.Done(k)
	}
	for _, k := range []string{"default/old-1", "default/old-2", "default/fresh"} {
		c.queue.Add(k)
	}
	var got []string
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		got = append(got, k)
		c.queue.Done(k)
	}
	if want := []string{"default/fresh", "default/old-1", "default/old-2"}; !slices.Equal(got, want) {
		t.Fatalf("queue gave %v, want %v", got, want)
	}
}
