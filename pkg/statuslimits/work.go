package statuslimits

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// maxReason and maxIdentifier bound a condition's reason and the names in
// a manifest's identifier (the CRD's own limits, checked again on read).
const (
	maxReason     = 1024
	maxIdentifier = 253
)

// Status returns raw when it is a JSON object of at most limit bytes and
// MaxStatusProperties fields, nil otherwise: a reported status that large
// is not copied at all (a cut one would not be JSON, and a partial one
// could read as a different state).
func Status(raw *runtime.RawExtension, limit int) *runtime.RawExtension {
	if raw == nil || len(raw.Raw) == 0 || len(raw.Raw) > limit {
		return nil
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw.Raw), []byte("{")) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw.Raw, &fields); err != nil || len(fields) > MaxStatusProperties {
		return nil
	}
	return raw
}

// StatusLeftOut says why Status(raw, limit) copied nothing of a reported
// status, for the binding to name it; "" when it copied it or there was
// none.
func StatusLeftOut(raw *runtime.RawExtension, limit int) string {
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 || Status(raw, limit) != nil {
		return ""
	}
	if len(raw.Raw) > limit {
		return fmt.Sprintf("reported status left out: %d bytes, over the limit of %d bytes", len(raw.Raw), limit)
	}
	return fmt.Sprintf("reported status left out: not a JSON object of at most %d fields", MaxStatusProperties)
}

// LeftOutField is the one field of the status that stands in for a
// reported status the hub did not keep, so the binding names it instead of
// showing nothing.
const LeftOutField = "statusLeftOut"

// LeftOut is the stand-in status carrying note.
func LeftOut(note string) *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]string{LeftOutField: note})
	return &runtime.RawExtension{Raw: raw}
}

// WorkStatus bounds a Work's status as the hub reads it, in place: at most
// MaxWorkConditions conditions (Applied, Available and Dispatching kept
// first) with messages of at most MaxConditionMessage characters, at most
// MaxManifestStatuses manifest statuses, each status at most
// MaxReflectedStatus bytes (else replaced by LeftOut) and a health the API knows
// (else Unknown), and no control characters or invalid UTF-8 in any
// string. The Work CRD admits nothing larger today; this holds the hub to
// the bounds against Works stored before the CRD had them, a CRD replaced
// by hand, or an apiserver that skipped validation.
func WorkStatus(s *workv1alpha1.WorkStatus) {
	if len(s.Conditions) > MaxWorkConditions {
		kept := make([]metav1.Condition, 0, MaxWorkConditions)
		known := map[string]bool{workv1alpha1.WorkConditionApplied: true, workv1alpha1.WorkConditionAvailable: true,
			workv1alpha1.WorkConditionDispatching: true}
		for _, pass := range []bool{true, false} {
			for _, c := range s.Conditions {
				if known[c.Type] == pass && len(kept) < MaxWorkConditions {
					kept = append(kept, c)
				}
			}
		}
		s.Conditions = kept
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type = Text(c.Type, maxIdentifier)
		c.Reason = Text(c.Reason, maxReason)
		c.Message = Text(c.Message, MaxConditionMessage)
	}
	if len(s.ManifestStatuses) > MaxManifestStatuses {
		s.ManifestStatuses = s.ManifestStatuses[:MaxManifestStatuses]
	}
	for i := range s.ManifestStatuses {
		ms := &s.ManifestStatuses[i]
		if note := StatusLeftOut(ms.Status, MaxReflectedStatus); note != "" {
			ms.Status = LeftOut(note)
		} else {
			ms.Status = Status(ms.Status, MaxReflectedStatus)
		}
		switch ms.Health {
		case "", workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy, workv1alpha1.ResourceUnknown:
		default:
			ms.Health = workv1alpha1.ResourceUnknown
		}
		if ms.ReadyEndpoints != nil && (*ms.ReadyEndpoints < 0 || *ms.ReadyEndpoints > MaxReadyEndpoints) {
			ms.ReadyEndpoints = nil // outside what the CRD admits: not a count to act on
		}
		id := &ms.Identifier
		for _, p := range []*string{&id.Group, &id.Version, &id.Kind, &id.Resource, &id.Namespace, &id.Name} {
			*p = Text(*p, maxIdentifier)
		}
	}
}
