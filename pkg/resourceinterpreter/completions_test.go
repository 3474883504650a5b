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
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestDivideCompletions(t *testing.T) {
	for _, c := range []struct {
		name    string
		total   int32
		weights []int32
		want    []int32
	}{
		{name: "same as parallelism", total: 3, weights: []int32{1, 2}, want: []int32{1, 2}},
		{name: "proportional", total: 10, weights: []int32{1, 4}, want: []int32{2, 8}},
		{name: "largest remainder, ties to the earlier name", total: 5, weights: []int32{1, 1}, want: []int32{3, 2}},
		{name: "largest remainder wins", total: 10, weights: []int32{1, 2}, want: []int32{3, 7}},
		{name: "no working cluster gets 0 when there are enough", total: 3, weights: []int32{1, 98, 1}, want: []int32{1, 1, 1}},
		{name: "too few completions for everyone", total: 1, weights: []int32{1, 1}, want: []int32{1, 0}},
		{name: "a cluster without parallelism gets none", total: 4, weights: []int32{0, 2}, want: []int32{0, 4}},
		{name: "no parallelism anywhere: even", total: 5, weights: []int32{0, 0}, want: []int32{3, 2}},
		{name: "zero completions", total: 0, weights: []int32{1, 2}, want: []int32{0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			names := []string{"member1", "member2", "member3"}[:len(c.weights)]
			got := DivideCompletions(c.total, c.weights, names)
			if !slices.Equal(got, c.want) {
				t.Errorf("DivideCompletions(%d, %v) = %v, want %v", c.total, c.weights, got, c.want)
			}
			var sum int32
			for _, n := range got {
				sum += n
			}
			if sum != c.total {
				t.Errorf("shares sum to %d, want %d", sum, c.total)
			}
		})
	}
}

func TestReviseCompletions(t *testing.T) {
	targets := []workv1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 3}}
	job := func(completions any) *unstructured.Unstructured {
		spec := map[string]any{"parallelism": int64(4)}
		if completions != nil {
			spec["completions"] = completions
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "spec": spec}}
	}
	for _, c := range []struct {
		name    string
		obj     *unstructured.Unstructured
		cluster string
		want    any
		wantErr bool
	}{
		{name: "member1's share", obj: job(int64(8)), cluster: "member1", want: int64(2)},
		{name: "member2's share", obj: job(int64(8)), cluster: "member2", want: int64(6)},
		{name: "JSON number", obj: job(float64(8)), cluster: "member2", want: int64(6)},
		{name: "no completions: a work queue stays one", obj: job(nil), cluster: "member1"},
		{name: "not a count", obj: job("many"), cluster: "member1", want: "many", wantErr: true},
		{name: "other kinds untouched", cluster: "member1", want: int64(8), obj: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"completions": int64(8)}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ReviseCompletions(c.obj, targets, c.cluster)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			got, _, _ := unstructured.NestedFieldNoCopy(c.obj.Object, "spec", "completions")
			if got != c.want {
				t.Errorf("completions = %#v, want %#v", got, c.want)
			}
		})
	}
}
