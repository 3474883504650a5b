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

package apis_test

import (
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The apiserver refuses a member's resource summary, and a binding's
// replica requirements, whose quantity strings are not bounded
// (quantities.CRDPattern, issue 36): decoding "1e-10000000" alone costs
// the hub's informer seconds, so it must never be stored. On c1a0803
// every one of these was stored.
func TestCRDsRefuseUnboundedQuantities(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	cs, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"},
		Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Pull}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// writeSummary writes the Cluster's status with one summary value as
	// raw JSON (a typed client could not carry the string unchanged).
	writeSummary := func(list, value string) error {
		c, err := cs.ClusterV1alpha1().Clusters().Get(ctx, "member1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		raw, _ := json.Marshal(c)
		_ = json.Unmarshal(raw, &obj)
		obj["apiVersion"], obj["kind"] = "cluster.flotilla.io/v1alpha1", "Cluster"
		obj["status"] = map[string]any{"resourceSummary": map[string]any{
			"allocatable": map[string]any{"cpu": "100", "pods": "110"},
			list:          map[string]any{"cpu": json.RawMessage(value)}}}
		body, _ := json.Marshal(obj)
		return cs.ClusterV1alpha1().RESTClient().Put().Resource("clusters").Name("member1").SubResource("status").
			Body(body).Do(ctx).Error()
	}
	for _, list := range []string{"allocatable", "allocated", "allocating"} {
		for _, v := range []string{`"1e-10000000"`, `"1e10000000"`, `"0e10000000"`, `"1e100"`, `"-1"`, `"` + strings.Repeat("1", 65) + `"`, `"1e4294967296"`} {
			if err := writeSummary(list, v); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.resourceSummary."+list+".cpu") {
				t.Errorf("%s cpu %.20s: %v; want Invalid naming the field", list, v, err)
			}
		}
		for _, v := range []string{`"100m"`, `"16Gi"`, `"9P"`, `"1e15"`, `"1e-9"`, `"+1"`, `42`} {
			if err := writeSummary(list, v); err != nil {
				t.Errorf("%s cpu %s refused: %v", list, v, err)
			}
		}
	}

	binding := func(cpu string) error {
		body := `{"apiVersion":"work.flotilla.io/v1alpha1","kind":"ResourceBinding","metadata":{"name":"web-deployment","namespace":"default"},` +
			`"spec":{"resource":{"apiVersion":"apps/v1","kind":"Deployment","name":"web","namespace":"default"},"replicas":1,` +
			`"replicaRequirements":{"resourceRequest":{"cpu":"` + cpu + `"}}}}`
		return cs.WorkV1alpha1().RESTClient().Post().Namespace("default").Resource("resourcebindings").Body([]byte(body)).Do(ctx).Error()
	}
	if err := binding("1e-10000000"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicaRequirements.resourceRequest.cpu") {
		t.Errorf("binding with cpu 1e-10000000: %v; want Invalid naming the field", err)
	}
	if err := binding("250m"); err != nil {
		t.Errorf("binding with cpu 250m refused: %v", err)
	}
}
