package remedy

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
)

func cluster(name string, conds map[string]metav1.ConditionStatus) *clusterv1alpha1.Cluster {
	c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for t, s := range conds {
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: t, Status: s})
	}
	return c
}

func match(condType, op, status string) remedyv1alpha1.DecisionMatch {
	return remedyv1alpha1.DecisionMatch{ClusterConditionMatch: &remedyv1alpha1.ClusterConditionRequirement{
		ConditionType: remedyv1alpha1.ConditionType(condType), Operator: remedyv1alpha1.ClusterConditionOperator(op), ConditionStatus: status}}
}

func remedy(name string, affinity []string, matches []remedyv1alpha1.DecisionMatch, actions ...remedyv1alpha1.RemedyAction) *remedyv1alpha1.Remedy {
	r := &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: remedyv1alpha1.RemedySpec{DecisionMatches: matches, Actions: actions}}
	if affinity != nil {
		r.Spec.ClusterAffinity = &remedyv1alpha1.ClusterAffinity{ClusterNames: affinity}
	}
	return r
}

const dns = "ServiceDomainNameResolutionReady"

func TestActions(t *testing.T) {
	broken := cluster("member1", map[string]metav1.ConditionStatus{dns: metav1.ConditionFalse, "Ready": metav1.ConditionTrue})
	fine := cluster("member2", map[string]metav1.ConditionStatus{dns: metav1.ConditionTrue, "Ready": metav1.ConditionTrue})
	silent := cluster("member3", nil)
	tc := remedyv1alpha1.TrafficControl
	onDNSFalse := remedy("dns", nil, []remedyv1alpha1.DecisionMatch{match(dns, "Equal", "False")}, tc)
	for _, tt := range []struct {
		name     string
		cluster  *clusterv1alpha1.Cluster
		remedies []*remedyv1alpha1.Remedy
		want     []string
		from     []string
	}{
		{"condition Equal matches", broken, []*remedyv1alpha1.Remedy{onDNSFalse}, []string{"TrafficControl"}, []string{"dns"}},
		{"condition Equal does not match", fine, []*remedyv1alpha1.Remedy{onDNSFalse}, nil, nil},
		{"missing condition matches no Equal", silent, []*remedyv1alpha1.Remedy{onDNSFalse}, nil, nil},
		{"missing condition matches no NotEqual", silent, []*remedyv1alpha1.Remedy{remedy("ne", nil, []remedyv1alpha1.DecisionMatch{match(dns, "NotEqual", "True")}, tc)}, nil, nil},
		{"NotEqual matches", broken, []*remedyv1alpha1.Remedy{remedy("ne", nil, []remedyv1alpha1.DecisionMatch{match(dns, "NotEqual", "True")}, tc)}, []string{"TrafficControl"}, []string{"ne"}},
		{"any condition type works", fine, []*remedyv1alpha1.Remedy{remedy("ready", nil, []remedyv1alpha1.DecisionMatch{match("Ready", "Equal", "True")}, tc)}, []string{"TrafficControl"}, []string{"ready"}},
		{"any one match is enough", fine, []*remedyv1alpha1.Remedy{remedy("two", nil, []remedyv1alpha1.DecisionMatch{match(dns, "Equal", "False"), match("Ready", "Equal", "True")}, tc)}, []string{"TrafficControl"}, []string{"two"}},
		{"nil clusterConditionMatch never matches", fine, []*remedyv1alpha1.Remedy{remedy("nil", nil, []remedyv1alpha1.DecisionMatch{{}}, tc)}, nil, nil},
		{"no decision matches act at once", silent, []*remedyv1alpha1.Remedy{remedy("upgrade", []string{"member3"}, nil, tc)}, []string{"TrafficControl"}, []string{"upgrade"}},
		{"affinity excludes", fine, []*remedyv1alpha1.Remedy{remedy("upgrade", []string{"member1"}, nil, tc)}, nil, nil},
		{"empty affinity selects none", fine, []*remedyv1alpha1.Remedy{remedy("none", []string{}, nil, tc)}, nil, nil},
		{"union is sorted and unique", broken, []*remedyv1alpha1.Remedy{remedy("b", nil, nil, tc), onDNSFalse, remedy("noop", nil, nil)}, []string{"TrafficControl"}, []string{"b", "dns"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, from := Actions(tt.cluster, tt.remedies)
			if !slices.Equal(got, tt.want) || !slices.Equal(from, tt.from) {
				t.Fatalf("Actions = %v from %v, want %v from %v", got, from, tt.want, tt.from)
			}
		})
	}
	deleting := remedy("gone", nil, nil, tc)
	deleting.DeletionTimestamp = &metav1.Time{}
	if got, _ := Actions(fine, []*remedyv1alpha1.Remedy{deleting}); got != nil {
		t.Fatalf("a Remedy being deleted still acts: %v", got)
	}
}
