package dnsprobe

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/health"
)

func TestVerdictFromLease(t *testing.T) {
	renew := time.Unix(5000, 0)
	// wellFormed is a verdict Lease as the Runner writes it; each case breaks
	// one part of it.
	wellFormed := func() *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:        VerdictLeaseName("node-a"),
				Labels:      map[string]string{LabelVerdict: "true", LabelStatus: "False", LabelReason: ReasonTimeout},
				Annotations: map[string]string{AnnotationNode: "node-a", AnnotationMessage: "no answer"},
			},
			Spec: coordinationv1.LeaseSpec{
				RenewTime:            &metav1.MicroTime{Time: renew},
				LeaseDurationSeconds: ptr.To[int32](60),
			},
		}
	}
	cases := []struct {
		name   string
		mutate func(*coordinationv1.Lease)
		want   *Verdict // nil: not a verdict
	}{
		{"well-formed", func(*coordinationv1.Lease) {}, &Verdict{
			Node:       "node-a",
			Observed:   health.Observation{Status: metav1.ConditionFalse, Reason: ReasonTimeout, Message: "no answer"},
			RenewTime:  renew,
			StaleAfter: time.Minute,
		}},
		{"without the node annotation the Lease name stands in", func(l *coordinationv1.Lease) {
			delete(l.Annotations, AnnotationNode)
		}, &Verdict{
			Node:       "flotilla-dns-node-a",
			Observed:   health.Observation{Status: metav1.ConditionFalse, Reason: ReasonTimeout, Message: "no answer"},
			RenewTime:  renew,
			StaleAfter: time.Minute,
		}},
		{"missing verdict label", func(l *coordinationv1.Lease) { delete(l.Labels, LabelVerdict) }, nil},
		{"verdict label not true", func(l *coordinationv1.Lease) { l.Labels[LabelVerdict] = "false" }, nil},
		{"bad status", func(l *coordinationv1.Lease) { l.Labels[LabelStatus] = "Maybe" }, nil},
		{"missing status", func(l *coordinationv1.Lease) { delete(l.Labels, LabelStatus) }, nil},
		{"missing renewTime", func(l *coordinationv1.Lease) { l.Spec.RenewTime = nil }, nil},
		{"missing leaseDurationSeconds", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = nil }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := wellFormed()
			tc.mutate(l)
			got, ok := VerdictFromLease(l)
			if tc.want == nil {
				if ok {
					t.Fatalf("got verdict %+v from a malformed Lease", got)
				}
				return
			}
			if !ok {
				t.Fatal("well-formed verdict Lease rejected")
			}
			if got.Node != tc.want.Node || got.Observed != tc.want.Observed ||
				!got.RenewTime.Equal(tc.want.RenewTime) || got.StaleAfter != tc.want.StaleAfter {
				t.Fatalf("got %+v, want %+v", got, *tc.want)
			}
		})
	}
}

func TestVerdictLeaseName(t *testing.T) {
	if got := VerdictLeaseName("node-a"); got != "flotilla-dns-node-a" {
		t.Fatalf("VerdictLeaseName(node-a) = %q", got)
	}

	// A name that does not fit is hashed: still a valid object name, and the
	// same on every call (each pod must find its own Lease again).
	long := strings.Repeat("n", 260)
	got := VerdictLeaseName(long)
	if len(got) > validation.DNS1123SubdomainMaxLength {
		t.Fatalf("name has %d characters, more than %d", len(got), validation.DNS1123SubdomainMaxLength)
	}
	if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
		t.Fatalf("%q is no DNS subdomain: %v", got, errs)
	}
	if again := VerdictLeaseName(long); again != got {
		t.Fatalf("not deterministic: %q then %q", got, again)
	}
	// A cut that would end on a '.' must not leave ".-" in the name.
	dotted := strings.Repeat("a", 222) + "." + strings.Repeat("b", 30)
	if errs := validation.IsDNS1123Subdomain(VerdictLeaseName(dotted)); len(errs) > 0 {
		t.Fatalf("%q is no DNS subdomain: %v", VerdictLeaseName(dotted), errs)
	}
	// Two long names with the same prefix must not share a Lease.
	if other := VerdictLeaseName(long[:259] + "m"); other == got {
		t.Fatalf("two nodes map to the same Lease %q", got)
	}
}

// FuzzVerdictFromLease: whatever a probe pod writes into its verdict Lease,
// the verdict the leader takes from it is bounded (the node name it quotes
// in the Cluster's condition, the message) and valid UTF-8, or refused.
func FuzzVerdictFromLease(f *testing.F) {
	f.Add("node-a", "True", "Resolved", "ok", int32(60))
	f.Add(strings.Repeat("n", 300), "False", "Timeout", strings.Repeat("\xff", 5000), int32(-1))
	f.Add("", "Maybe", "", "", int32(0))
	f.Fuzz(func(t *testing.T, node, status, reason, message string, seconds int32) {
		now := metav1.Now()
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "dns-probe-x",
				Labels:      map[string]string{LabelVerdict: "true", LabelStatus: status, LabelReason: reason},
				Annotations: map[string]string{AnnotationNode: node, AnnotationMessage: message}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Time}, LeaseDurationSeconds: &seconds},
		}
		v, ok := VerdictFromLease(l)
		if !ok {
			return
		}
		if len([]rune(v.Node)) > maxNodeName || len([]rune(v.Observed.Message)) > maxVerdictMessage {
			t.Fatalf("unbounded verdict: node %d, message %d characters", len(v.Node), len(v.Observed.Message))
		}
		if !utf8.ValidString(v.Node) || !utf8.ValidString(v.Observed.Message) {
			t.Fatalf("invalid UTF-8 in the verdict")
		}
	})
}
