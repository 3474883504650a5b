package statuslimits

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestText(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int
		want  string
	}{
		{"plain", 10, "plain"},
		{"a\x1b[2Jb\tc\nd\u202ee\u0085", 100, "a [2Jb c d e "},
		{"bad\xff\xfebyte", 100, "bad\uFFFDbyte"},
		{"abcdef", 4, "abc…"},
		{"éééé", 4, "éééé"},
		{"ééééé", 4, "ééé…"},
		{"x", 0, ""},
	} {
		if got := Text(c.in, c.limit); got != c.want {
			t.Errorf("Text(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
		if got := Text(c.in, c.limit); utf8.RuneCountInString(got) > c.limit || !utf8.ValidString(got) || Text(got, c.limit) != got {
			t.Errorf("Text(%q, %d) = %q: not bounded, valid and stable", c.in, c.limit, got)
		}
	}
}

func TestJoin(t *testing.T) {
	items := []string{}
	for i := range 100 {
		items = append(items, "member"+strconv.Itoa(i)+": "+strings.Repeat("x", 50))
	}
	if got := Join(items[:3], "; ", 1000, "clusters"); got != strings.Join(items[:3], "; ") {
		t.Errorf("fits: %q", got)
	}
	for _, limit := range []int{10, 30, 100, 1000, 4000} {
		got := Join(items, "; ", limit, "clusters")
		if utf8.RuneCountInString(got) > limit {
			t.Errorf("limit %d: %d characters: %q", limit, utf8.RuneCountInString(got), got)
		}
		if limit >= 100 && !strings.HasSuffix(got, " more clusters") {
			t.Errorf("limit %d: no note of the rest: %q", limit, got)
		}
	}
	got := Join(items, "; ", 1000, "clusters")
	kept := strings.Count(got, "member")
	if !strings.HasSuffix(got, "… and "+strconv.Itoa(100-kept)+" more clusters") {
		t.Errorf("%d items kept, %q", kept, got)
	}
}

func TestStatusShareFitsTheBudget(t *testing.T) {
	for _, n := range []int{1, 10, 32, 100, 1000} {
		s := StatusShare(n)
		if s > MaxReflectedStatus || s < MinStatusShare || n*s > AggregatedStatusBudget && s != MinStatusShare {
			t.Errorf("StatusShare(%d) = %d", n, s)
		}
	}
}

func TestStatus(t *testing.T) {
	raw := func(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
	if Status(raw(`{"replicas":3}`), 100) == nil {
		t.Error("a small object was dropped")
	}
	many := "{"
	for i := range MaxStatusProperties + 1 {
		if i > 0 {
			many += ","
		}
		many += `"f` + strconv.Itoa(i) + `":1`
	}
	many += "}"
	for name, c := range map[string]struct {
		raw   *runtime.RawExtension
		limit int
	}{
		"too large":       {raw(`{"a":"` + strings.Repeat("x", 200) + `"}`), 100},
		"not an object":   {raw(`[1,2]`), 100},
		"too many fields": {raw(many), 1 << 20},
		"nil":             {nil, 100},
	} {
		if Status(c.raw, c.limit) != nil {
			t.Errorf("%s: kept", name)
		}
	}
}

func TestWorkStatus(t *testing.T) {
	s := workv1alpha1.WorkStatus{}
	for i := range 12 {
		s.Conditions = append(s.Conditions, metav1.Condition{Type: "Custom" + strconv.Itoa(i), Message: strings.Repeat("\x1b", 40000)})
	}
	s.Conditions = append(s.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Message: "ok"})
	for range 70 {
		s.ManifestStatuses = append(s.ManifestStatuses, workv1alpha1.ManifestStatus{Health: "Splendid",
			Status: &runtime.RawExtension{Raw: []byte(`{"a":"` + strings.Repeat("x", MaxReflectedStatus) + `"}`)}})
	}
	WorkStatus(&s)
	if len(s.Conditions) != MaxWorkConditions || s.Conditions[0].Type != workv1alpha1.WorkConditionApplied {
		t.Errorf("conditions: %d, first %s", len(s.Conditions), s.Conditions[0].Type)
	}
	for _, c := range s.Conditions {
		if utf8.RuneCountInString(c.Message) > MaxConditionMessage || strings.Contains(c.Message, "\x1b") {
			t.Errorf("condition %s: message not bounded", c.Type)
		}
	}
	standIn := s.ManifestStatuses[0].Status
	if len(s.ManifestStatuses) != MaxManifestStatuses || standIn == nil || !strings.Contains(string(standIn.Raw), `"`+LeftOutField+`":"reported status left out`) ||
		len(standIn.Raw) > MinStatusShare || s.ManifestStatuses[0].Health != workv1alpha1.ResourceUnknown {
		t.Errorf("manifest statuses: %d, first %+v", len(s.ManifestStatuses), s.ManifestStatuses[0])
	}
}

// The Work CRD's bounds are this package's: the markers in
// pkg/apis/work/v1alpha1 repeat the numbers, and the generated CRD must
// say what the agent keeps to and the hub expects.
func TestCRDMatchesLimits(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "crds", "work.flotilla.io_works.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	conds, manifests := status.Properties["conditions"], status.Properties["manifestStatuses"]
	if conds.MaxItems == nil || *conds.MaxItems != MaxWorkConditions {
		t.Errorf("conditions maxItems %v, want %d", conds.MaxItems, MaxWorkConditions)
	}
	if len(conds.XValidations) != 1 || !strings.Contains(conds.XValidations[0].Rule, "size(c.message) <= "+strconv.Itoa(MaxConditionMessage)) {
		t.Errorf("conditions rules %+v, want messages of at most %d", conds.XValidations, MaxConditionMessage)
	}
	if manifests.MaxItems == nil || *manifests.MaxItems != MaxManifestStatuses {
		t.Errorf("manifestStatuses maxItems %v, want %d", manifests.MaxItems, MaxManifestStatuses)
	}
	if st := manifests.Items.Schema.Properties["status"]; st.MaxProperties == nil || *st.MaxProperties != MaxStatusProperties {
		t.Errorf("manifestStatuses[].status maxProperties %v, want %d", st.MaxProperties, MaxStatusProperties)
	}
	if re := manifests.Items.Schema.Properties["readyEndpoints"]; re.Maximum == nil || *re.Maximum != MaxReadyEndpoints {
		t.Errorf("manifestStatuses[].readyEndpoints maximum %v, want %d", re.Maximum, MaxReadyEndpoints)
	}
	for name, p := range manifests.Items.Schema.Properties["identifier"].Properties {
		if p.Type == "string" && (p.MaxLength == nil || *p.MaxLength > maxIdentifier) {
			t.Errorf("identifier.%s maxLength %v, want at most %d", name, p.MaxLength, maxIdentifier)
		}
	}
}

// A status the hub does not copy is named, with why; one it copies, or no
// status at all, says nothing.
func TestStatusLeftOut(t *testing.T) {
	big := &runtime.RawExtension{Raw: []byte(`{"f":"` + strings.Repeat("a", 2000) + `"}`)}
	for _, tc := range []struct {
		name string
		raw  *runtime.RawExtension
		want string
	}{
		{"none", nil, ""},
		{"empty", &runtime.RawExtension{}, ""},
		{"kept", &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}, ""},
		{"over the share", big, "reported status left out: 2008 bytes, over the limit of 1024 bytes"},
		{"not an object", &runtime.RawExtension{Raw: []byte(`[1,2]`)}, "reported status left out: not a JSON object"},
	} {
		got := StatusLeftOut(tc.raw, 1024)
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: StatusLeftOut = %q, want %q", tc.name, got, tc.want)
		}
		if (got == "") != (tc.raw == nil || len(tc.raw.Raw) == 0 || Status(tc.raw, 1024) != nil) {
			t.Errorf("%s: a note %q disagrees with Status", tc.name, got)
		}
	}
}
