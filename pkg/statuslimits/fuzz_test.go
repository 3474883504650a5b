package statuslimits

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// FuzzWorkStatus: a member's Work status, as the hub reads it (WorkStatus,
// its Work cache) and copies one cluster's share of it into a binding
// (Status, StatusLeftOut), whatever the bytes of the manifest statuses,
// the messages and the healths. No panic; within the bounds this package
// documents (conditions, messages, manifest statuses, each status a JSON
// object of at most MaxReflectedStatus bytes and MaxStatusProperties
// fields, a known health); the same answer twice and again on its own
// output (idempotent); and in bounded time.
func FuzzWorkStatus(f *testing.F) {
	f.Add([]byte(`{"replicas":3,"readyReplicas":3}`), "Applied", "ok", "Healthy", uint8(1), uint16(512))
	f.Add([]byte(`[1,2]`), "Custom", "\x1b[2J\u202e\xff", "Splendid", uint8(70), uint16(0))
	f.Add([]byte(`{"a":"`+strings.Repeat("x", MaxReflectedStatus)+`"}`), "Available", strings.Repeat("é", 5000), "", uint8(3), uint16(600))
	f.Add([]byte(`{"statusLeftOut":"reported status left out: 20000 bytes, over the limit of 16384 bytes"}`), "Applied", "", "Unknown", uint8(2), uint16(16384))
	f.Add([]byte(" null "), "", "", "Unhealthy", uint8(0), uint16(1))
	f.Fuzz(func(t *testing.T, status []byte, condType, message, health string, manifests uint8, share uint16) {
		in := workv1alpha1.WorkStatus{}
		for k := range int(manifests%16) + 1 {
			in.Conditions = append(in.Conditions, metav1.Condition{Type: condType + strings.Repeat("x", k), Reason: message, Message: message})
		}
		// Past the first few, manifests repeat a small status: enough to
		// pass MaxManifestStatuses without parsing 70 large ones per run.
		for k := range int(manifests) % (MaxManifestStatuses + 8) {
			raw := []byte(`{"replicas":1}`)
			if k < 4 {
				raw = bytes.Clone(status)
			}
			in.ManifestStatuses = append(in.ManifestStatuses, workv1alpha1.ManifestStatus{Health: workv1alpha1.ResourceHealth(health),
				Status:     &runtime.RawExtension{Raw: raw},
				Identifier: workv1alpha1.ResourceIdentifier{Kind: condType, Name: message}})
		}
		again := *in.DeepCopy()
		start := time.Now()
		WorkStatus(&in)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("WorkStatus took %v", d)
		}
		WorkStatus(&again)
		if !apiequality.Semantic.DeepEqual(in, again) {
			t.Fatal("WorkStatus is not deterministic")
		}
		checkWorkStatus(t, &in)
		twice := *in.DeepCopy()
		WorkStatus(&twice)
		if !apiequality.Semantic.DeepEqual(in, twice) {
			t.Fatalf("WorkStatus is not idempotent")
		}
		// The binding's copy of one cluster's status.
		limit := int(share)
		for _, ms := range in.ManifestStatuses {
			kept, note := Status(ms.Status, limit), StatusLeftOut(ms.Status, limit)
			if kept != nil && (len(kept.Raw) > limit || note != "") {
				t.Fatalf("Status kept %d bytes over %d, note %q", len(kept.Raw), limit, note)
			}
			if kept == nil && ms.Status != nil && len(bytes.TrimSpace(ms.Status.Raw)) > 0 && note == "" {
				t.Fatal("a status left out without a note")
			}
		}
	})
}

func checkWorkStatus(t *testing.T, s *workv1alpha1.WorkStatus) {
	t.Helper()
	if len(s.Conditions) > MaxWorkConditions || len(s.ManifestStatuses) > MaxManifestStatuses {
		t.Fatalf("%d conditions, %d manifest statuses", len(s.Conditions), len(s.ManifestStatuses))
	}
	for _, c := range s.Conditions {
		for _, str := range []string{c.Type, c.Reason, c.Message} {
			if !utf8.ValidString(str) || !clean(str) {
				t.Fatalf("condition string %q is not clean UTF-8", str)
			}
		}
		if utf8.RuneCountInString(c.Message) > MaxConditionMessage || utf8.RuneCountInString(c.Reason) > maxReason {
			t.Fatalf("condition message of %d characters", utf8.RuneCountInString(c.Message))
		}
	}
	for _, ms := range s.ManifestStatuses {
		switch ms.Health {
		case "", workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy, workv1alpha1.ResourceUnknown:
		default:
			t.Fatalf("health %q", ms.Health)
		}
		if ms.Status == nil {
			continue
		}
		var fields map[string]json.RawMessage
		if len(ms.Status.Raw) > MaxReflectedStatus || json.Unmarshal(ms.Status.Raw, &fields) != nil || fields == nil ||
			len(fields) > MaxStatusProperties {
			t.Fatalf("status of %d bytes kept: %.200q", len(ms.Status.Raw), ms.Status.Raw)
		}
		if !clean(ms.Identifier.Name) || utf8.RuneCountInString(ms.Identifier.Name) > maxIdentifier {
			t.Fatalf("identifier %q", ms.Identifier.Name)
		}
	}
}
