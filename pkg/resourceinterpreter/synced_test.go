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

package resourceinterpreter

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

// HasSynced holds until every customization the informer listed is in use:
// a hub controller that waits for it never reads a Divided custom workload
// without its replicaResource after a restart.
func TestHasSyncedWaitsForTheListedCustomizations(t *testing.T) {
	if !Default.HasSynced() || !New().HasSynced() {
		t.Fatal("a nil or never-watched Interpreter must count as synced")
	}
	ric := &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"},
			Customizations: configv1alpha1.CustomizationRules{ReplicaResource: &configv1alpha1.ReplicaResourceRequirement{
				Replicas: "object.spec.size"}},
		}}
	factory := flotillainformers.NewSharedInformerFactory(fake.NewSimpleClientset(ric), 0)
	informer := factory.Config().V1alpha1().ResourceInterpreterCustomizations().Informer()
	interp := New()
	if err := interp.Watch(informer); err != nil {
		t.Fatal(err)
	}
	if interp.HasSynced() {
		t.Fatal("synced before the informer listed anything")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return interp.HasSynced(), nil
	}); err != nil {
		t.Fatal("never synced")
	}
	if interp.Rules(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}) == nil {
		t.Fatal("synced, but the listed customization is not in use")
	}
}
