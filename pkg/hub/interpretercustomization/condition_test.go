package interpretercustomization

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
)

func TestCondition(t *testing.T) {
	t.Parallel()
	ric := func(expr string) *configv1alpha1.ResourceInterpreterCustomization {
		return &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "r", Generation: 4},
			Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
				Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"},
				Customizations: configv1alpha1.CustomizationRules{
					HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: expr}}}}
	}
	c := Condition(ric("true"))
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonCompiled || c.ObservedGeneration != 4 {
		t.Fatalf("valid: %+v", c)
	}
	c = Condition(ric(`object.spec.a.all(x, object.spec.b.all(y, object.spec.c.all(z, x + y + z > 0)))`))
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalid ||
		!strings.Contains(c.Message, "spec.customizations.healthInterpretation.expression") || !strings.Contains(c.Message, "exceeds the budget") ||
		!strings.Contains(c.Message, "example.com/v1 Widget falls back") {
		t.Fatalf("over budget: %+v", c)
	}
	long := ric(strings.Repeat("object.x.(", 2000))
	if c := Condition(long); len(c.Message) > maxMessage {
		t.Fatalf("message of %d bytes", len(c.Message))
	}
}
