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

package statepreservation

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func rule(label, path string) policyv1alpha1.StatePreservationRule {
	return policyv1alpha1.StatePreservationRule{AliasLabelName: label, JSONPath: path}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		rules   []policyv1alpha1.StatePreservationRule
		wantErr string
	}{
		{"good", []policyv1alpha1.StatePreservationRule{rule("flink.example.io/checkpoint-path", "{.jobStatus.checkpointPath}")}, ""},
		{"filter expression", []policyv1alpha1.StatePreservationRule{rule("ready", `{.conditions[?(@.type=="Ready")].status}`)}, ""},
		{"unclosed brace parses in CEL, not in jsonpath", []policyv1alpha1.StatePreservationRule{rule("a", "{.jobStatus.{}")}, "does not parse"},
		{"unterminated filter", []policyv1alpha1.StatePreservationRule{rule("a", "{.items[?(@.x==}")}, "does not parse"},
		{"bad label key", []policyv1alpha1.StatePreservationRule{rule("Not A Key", "{.a}")}, "not a label key"},
		{"empty label key", []policyv1alpha1.StatePreservationRule{rule("", "{.a}")}, "not a label key"},
		{"one bad of two", []policyv1alpha1.StatePreservationRule{rule("a", "{.a}"), rule("b", "{.b[}")}, "rule b"},
	}
	for _, tc := range cases {
		err := Validate(tc.rules)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: Validate = %v, want error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestExtract(t *testing.T) {
	const flink = `{"jobStatus":{"checkpointPath":"s3-bucket.ckpt-0042","state":"RUNNING","savepointCount":3,
		"big":12345678901234567,"ratio":0.5,"healthy":true,"nothing":null,"tags":["a","b"],"info":{"x":"y"},
		"long":"` + "x" + `"},"conditions":[{"type":"Ready","status":"True"},{"type":"Synced","status":"False"}]}`
	long := strings.Repeat("a", 64)
	cases := []struct {
		name    string
		status  string
		rules   []policyv1alpha1.StatePreservationRule
		want    map[string]string
		wantErr []string
	}{
		{name: "string", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("flink.example.io/checkpoint", "{.jobStatus.checkpointPath}")},
			want: map[string]string{"flink.example.io/checkpoint": "s3-bucket.ckpt-0042"}},
		{name: "integer, large integer, float, bool", status: flink, rules: []policyv1alpha1.StatePreservationRule{
			rule("count", "{.jobStatus.savepointCount}"), rule("big", "{.jobStatus.big}"), rule("ratio", "{.jobStatus.ratio}"), rule("healthy", "{.jobStatus.healthy}")},
			want: map[string]string{"count": "3", "big": "12345678901234567", "ratio": "0.5", "healthy": "true"}},
		{name: "Karmada's spelling with spaces", status: `{"jobStatus":{"jobId":"b4a9e9c0c7a54e0d8ec2c7d9f2a0b1c3"}}`,
			rules: []policyv1alpha1.StatePreservationRule{rule("application.flotilla.io/failover-jobid", "{ .jobStatus.jobId }")},
			want:  map[string]string{"application.flotilla.io/failover-jobid": "b4a9e9c0c7a54e0d8ec2c7d9f2a0b1c3"}},
		{name: "filter selects one", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("ready", `{.conditions[?(@.type=="Ready")].status}`)},
			want: map[string]string{"ready": "True"}},
		{name: "missing field carries nothing, the others still do", status: flink, rules: []policyv1alpha1.StatePreservationRule{
			rule("gone", "{.jobStatus.savepointPath}"), rule("state", "{.jobStatus.state}")},
			want: map[string]string{"state": "RUNNING"}, wantErr: []string{"rule gone", "not found"}},
		{name: "a list result", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("tags", "{.jobStatus.tags}")},
			wantErr: []string{"selects a list"}},
		{name: "several values", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("types", "{.conditions[*].type}")},
			wantErr: []string{"selects 2 values"}},
		{name: "text around the path", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("s", "{.jobStatus.state}-x")},
			wantErr: []string{"selects 2 values"}},
		{name: "a map result", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("info", "{.jobStatus.info}")},
			wantErr: []string{"selects a map"}},
		{name: "null", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("n", "{.jobStatus.nothing}")},
			wantErr: []string{"null"}},
		{name: "filter selects none", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("x", `{.conditions[?(@.type=="Nope")].status}`)},
			wantErr: []string{"selects 0 values"}},
		{name: "a value longer than a label value is carried (as an annotation)", status: `{"path":"` + long + `"}`, rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.path}")},
			want: map[string]string{"p": long}},
		{name: "too long value", status: `{"path":"` + strings.Repeat("x", MaxValueLength+1) + `"}`, rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.path}")},
			wantErr: []string{"4097 bytes long", "4096"}},
		{name: "value with a slash is carried (as an annotation)", status: `{"path":"s3://bucket/ckpt"}`, rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.path}")},
			want: map[string]string{"p": "s3://bucket/ckpt"}},
		{name: "empty string is a valid label value", status: `{"path":""}`, rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.path}")},
			want: map[string]string{"p": ""}},
		{name: "path that does not parse", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.jobStatus.{}")},
			wantErr: []string{"does not parse"}},
		{name: "bad label key", status: flink, rules: []policyv1alpha1.StatePreservationRule{rule("-bad-", "{.jobStatus.state}")},
			wantErr: []string{"not a label key"}},
		{name: "no status", status: "", rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.a}")},
			wantErr: []string{"reported no status"}},
		{name: "null status", status: "null", rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.a}")},
			wantErr: []string{"reported no status"}},
		{name: "garbage status", status: "{not json", rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.a}")},
			wantErr: []string{"not JSON"}},
		{name: "status is a list", status: `[1,2]`, rules: []policyv1alpha1.StatePreservationRule{rule("p", "{.a}")},
			wantErr: []string{"rule p"}},
		{name: "no rules", status: flink},
	}
	for _, tc := range cases {
		var status *runtime.RawExtension
		if tc.status != "" {
			status = &runtime.RawExtension{Raw: []byte(tc.status)}
		}
		got, err := Extract(tc.rules, status)
		if Describe(got) != Describe(tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: Extract = %v, want %v", tc.name, got, tc.want)
		}
		if len(tc.wantErr) == 0 && err != nil {
			t.Errorf("%s: unexpected error %v", tc.name, err)
		}
		for _, want := range tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want it to contain %q", tc.name, err, want)
			}
		}
	}
}

func TestForEviction(t *testing.T) {
	items := []workv1alpha1.AggregatedStatusItem{
		{ClusterName: "member1", Status: &runtime.RawExtension{Raw: []byte(`{"jobStatus":{"checkpointPath":"ckpt-1"}}`)}},
		{ClusterName: "member2", Status: &runtime.RawExtension{Raw: []byte(`{"jobStatus":{"checkpointPath":"ckpt-2"}}`)}},
	}
	sp := &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{rule("ckpt", "{.jobStatus.checkpointPath}")}}
	if got, err := ForEviction(sp, items, "member2"); err != nil || got["ckpt"] != "ckpt-2" {
		t.Errorf("member2: %v, %v; want its own checkpoint", got, err)
	}
	if got, err := ForEviction(sp, items, "member3"); err == nil || got != nil {
		t.Errorf("a cluster that never reported: %v, %v; want nothing and an error", got, err)
	}
	if got, err := ForEviction(nil, items, "member1"); err != nil || got != nil {
		t.Errorf("no statePreservation: %v, %v; want nothing at all", got, err)
	}
}

func TestSplit(t *testing.T) {
	labels, annotations := Split(map[string]string{
		"flink.example.io/job-id":          "b4a9e9c0",
		"flink.example.io/checkpoint-path": "s3://bucket/ckpt-42",
		"flink.example.io/empty":           "",
	})
	if len(labels) != 2 || labels["flink.example.io/job-id"] != "b4a9e9c0" || labels["flink.example.io/empty"] != "" {
		t.Errorf("labels = %v", labels)
	}
	if len(annotations) != 1 || annotations["flink.example.io/checkpoint-path"] != "s3://bucket/ckpt-42" {
		t.Errorf("annotations = %v", annotations)
	}
	if l, a := Split(nil); l != nil || a != nil {
		t.Errorf("Split(nil) = %v, %v", l, a)
	}
}

// Issue 30 item 6: the value is the member's claim; valuePattern decides
// whether it is carried.
func TestExtractValuePattern(t *testing.T) {
	status := &runtime.RawExtension{Raw: []byte(`{"jobStatus":{"checkpointPath":"s3://attacker/loot","jobId":"b4a9e9c0c7a54e0d","n":42}}`)}
	rules := []policyv1alpha1.StatePreservationRule{
		{AliasLabelName: "ckpt", JSONPath: "{.jobStatus.checkpointPath}", ValuePattern: `s3://flink/checkpoints/[a-z]+/chk-[0-9]+`},
		{AliasLabelName: "job", JSONPath: "{.jobStatus.jobId}", ValuePattern: `[0-9a-f]{16}`},
		{AliasLabelName: "partial", JSONPath: "{.jobStatus.jobId}", ValuePattern: `b4a9`}, // anchored: a prefix is no match
		{AliasLabelName: "n", JSONPath: "{.jobStatus.n}", ValuePattern: `[0-9]+`},
		{AliasLabelName: "bad", JSONPath: "{.jobStatus.n}", ValuePattern: `(`},
	}
	got, err := Extract(rules, status)
	if want := map[string]string{"job": "b4a9e9c0c7a54e0d", "n": "42"}; !reflect.DeepEqual(got, want) {
		t.Errorf("carried %v, want %v", got, want)
	}
	for _, s := range []string{`rule ckpt`, `"s3://attacker/loot" does not match valuePattern`, `rule partial`, `rule bad`, `valuePattern does not compile`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not say %q", err, s)
		}
	}
	if Validate(rules[:4]) != nil || Validate(rules[4:]) == nil {
		t.Error("Validate: a pattern that compiles is valid, one that does not is not")
	}
	if note := Note(err); !strings.HasPrefix(note, "; state not carried: ") || len(note) > maxNote {
		t.Errorf("Note = %q", note)
	}
}
