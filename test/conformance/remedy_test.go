package conformance

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
)

// remedyCase creates a Remedy of TrafficControl for one member, with the
// decision matches given (DNS resolution False, or none).
func remedyCase(t *testing.T, matches []remedyv1alpha1.DecisionMatch) (c *tc, target, name string) {
	c = newCase(t)
	target = c.simClusters(1)[0]
	name = "remedy-" + c.id
	if _, err := c.fc.RemedyV1alpha1().Remedies().Create(c.ctx, &remedyv1alpha1.Remedy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: remedyv1alpha1.RemedySpec{ClusterAffinity: &remedyv1alpha1.ClusterAffinity{ClusterNames: []string{target}},
			DecisionMatches: matches, Actions: []remedyv1alpha1.RemedyAction{remedyv1alpha1.TrafficControl}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.fc.RemedyV1alpha1().Remedies().Delete(context.Background(), name, deleteNow) })
	return c, target, name
}

var dnsFalse = []remedyv1alpha1.DecisionMatch{{ClusterConditionMatch: &remedyv1alpha1.ClusterConditionRequirement{
	ConditionType: remedyv1alpha1.ServiceDomainNameResolutionReady, Operator: remedyv1alpha1.ClusterConditionEqual, ConditionStatus: string(metav1.ConditionFalse)}}}

func (c *tc) setCondition(cluster, condition string, status metav1.ConditionStatus) {
	c.t.Helper()
	c.eventually(condition+"="+string(status), func() (bool, error) {
		cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: condition, Status: status, Reason: "Test", Message: "set by the test"})
		_, err = c.fc.ClusterV1alpha1().Clusters().UpdateStatus(c.ctx, cl, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

func (c *tc) waitTrafficControl(cluster string, want bool) {
	c.t.Helper()
	c.eventually("TrafficControl in remedyActions", func() (bool, error) {
		cl, err := c.fc.ClusterV1alpha1().Clusters().Get(c.ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.Contains(cl.Status.RemedyActions, string(remedyv1alpha1.TrafficControl)) == want, nil
	})
}

// Karmada: test/e2e/suites/base/remedy_test.go, Context("remedy.spec.decisionMatches
// is not empty"), It("Cluster domain name resolution function encounters an
// exception and recover").
func TestKarmada_Remedy_DNSFailureAndRecover(t *testing.T) {
	c, target, _ := remedyCase(t, dnsFalse)
	c.setCondition(target, string(remedyv1alpha1.ServiceDomainNameResolutionReady), metav1.ConditionFalse)
	c.waitTrafficControl(target, true)
	c.setCondition(target, string(remedyv1alpha1.ServiceDomainNameResolutionReady), metav1.ConditionTrue)
	c.waitTrafficControl(target, false)
}

// Karmada: remedy_test.go, Context("remedy.spec.decisionMatches is not
// empty"), It("Cluster domain name resolution function encounters an
// exception, then remove the remedy resource").
func TestKarmada_Remedy_DNSFailureThenRemoveRemedy(t *testing.T) {
	c, target, name := remedyCase(t, dnsFalse)
	c.setCondition(target, string(remedyv1alpha1.ServiceDomainNameResolutionReady), metav1.ConditionFalse)
	c.waitTrafficControl(target, true)
	if err := c.fc.RemedyV1alpha1().Remedies().Delete(c.ctx, name, deleteNow); err != nil {
		t.Fatal(err)
	}
	c.waitTrafficControl(target, false)
}

// Karmada: remedy_test.go, Context("test with nil decision matches remedy"),
// It("Create an immediately type remedy, then remove it").
func TestKarmada_Remedy_NilDecisionMatches(t *testing.T) {
	c, target, name := remedyCase(t, nil)
	c.waitTrafficControl(target, true)
	if err := c.fc.RemedyV1alpha1().Remedies().Delete(c.ctx, name, deleteNow); err != nil {
		t.Fatal(err)
	}
	c.waitTrafficControl(target, false)
}
