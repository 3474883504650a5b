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

package binding

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/render"
)

// One sync judges each Work as it first read it: an agent's report that
// reaches the cache mid-sync (after the rollout decision read the Work,
// before the aggregated status does) waits for the next sync, so the two
// halves of one status never disagree about a cluster.
func TestWorkReadsKeepTheFirstReadOfASync(t *testing.T) {
	binding := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "uid-app"}}
	works := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ns, name, err := cache.SplitMetaNamespaceKey(render.WorkKey(binding, "member1"))
	if err != nil {
		t.Fatal(err)
	}
	before := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1"}}
	if err := works.Add(before); err != nil {
		t.Fatal(err)
	}
	c := &Controller{works: works}
	reads := c.workReads(binding)
	if got := reads.get("member1"); got != before {
		t.Fatalf("first read = %v, want the cached Work", got)
	}
	if got := reads.get("member2"); got != nil {
		t.Fatalf("member2 = %v, want nil (no Work)", got)
	}
	reported := before.DeepCopy()
	reported.ResourceVersion = "2"
	reported.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue}}
	if err := works.Update(reported); err != nil {
		t.Fatal(err)
	}
	if err := works.Add(&workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "flotilla-es-member2"}}); err != nil {
		t.Fatal(err)
	}
	if got := reads.get("member1"); got != before {
		t.Errorf("second read in the same sync = resourceVersion %s, want the first read's 1", got.ResourceVersion)
	}
	if got := reads.get("member2"); got != nil {
		t.Errorf("member2 in the same sync = %v, want still nil", got)
	}
	if got := c.workReads(binding).get("member1"); got != reported {
		t.Errorf("the next sync reads %v, want the report", got)
	}
}
