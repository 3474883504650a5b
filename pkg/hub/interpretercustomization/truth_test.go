package interpretercustomization

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
)

func widget(apiVersion string, rules configv1alpha1.CustomizationRules) *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "r", Generation: 2},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: apiVersion, Kind: "Widget"},
			Customizations: rules}}
}

// A customization that reached the store without the webhook (installed
// before it, or while it was down) is used by the hub and the agents
// exactly when its Compiled condition is True.
func TestConditionSaysWhetherTheRulesAreUsed(t *testing.T) {
	health := func(expr string) configv1alpha1.CustomizationRules {
		return configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: expr}}
	}
	for name, ric := range map[string]*configv1alpha1.ResourceInterpreterCustomization{
		"valid":                  widget("example.com/v1", health("true")),
		"does not compile":       widget("example.com/v1", health("object.status ==")),
		"over the budget":        widget("example.com/v1", health(`object.spec.a.all(x, object.spec.b.all(y, object.spec.c.all(z, x + y + z > 0)))`)),
		"Flotilla's own kind":    widget("apps.flotilla.io/v1alpha1", health("true")),
		"Flotilla's group":       widget("flotilla.io/v1", health("true")),
		"no operation":           widget("example.com/v1", configv1alpha1.CustomizationRules{}),
		"invalid target version": widget("a/b/c", health("true")),
	} {
		interp := resourceinterpreter.New()
		interp.Set(ric)
		gv, _ := schema.ParseGroupVersion(ric.Spec.Target.APIVersion)
		used := interp.Rules(gv.WithKind(ric.Spec.Target.Kind)) != nil
		c := Condition(ric)
		if said := c.Status == metav1.ConditionTrue; said != used {
			t.Errorf("%s: the hub uses the rules: %v; the condition says %s %s: %s", name, used, c.Status, c.Reason, c.Message)
		}
	}
}

// longInvalid is a customization whose condition message is longer than
// maxMessage and made of two-byte characters; pad shifts where a byte
// bound falls.
func longInvalid(pad int) *configv1alpha1.ResourceInterpreterCustomization {
	return widget("example.com/v1", configv1alpha1.CustomizationRules{HealthInterpretation: &configv1alpha1.HealthInterpretation{
		Expression: strings.Repeat("x", pad) + " == '" + strings.Repeat("é", 3000)}})
}

func TestConditionCutsTheMessageOnACharacter(t *testing.T) {
	for pad := range 3 {
		c := Condition(longInvalid(pad))
		if c.Status != metav1.ConditionFalse || !utf8.ValidString(c.Message) || len(c.Message) > maxMessage {
			t.Fatalf("pad %d: %s, message of %d bytes (valid UTF-8: %v)", pad, c.Status, len(c.Message), utf8.ValidString(c.Message))
		}
	}
}

// stored is cond as the apiserver keeps it: JSON, where an invalid byte is
// U+FFFD.
func stored(t *testing.T, cond metav1.Condition) metav1.Condition {
	t.Helper()
	raw, err := json.Marshal(cond)
	if err != nil {
		t.Fatal(err)
	}
	var out metav1.Condition
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The condition the apiserver stored is the one the hub computes: a sync
// (on every hub start, every new leader) does not write it again.
func TestSyncDoesNotRewriteAStoredLongMessage(t *testing.T) {
	for pad := range 3 {
		ric := longInvalid(pad)
		cond := Condition(ric)
		cond.LastTransitionTime = metav1.Now()
		ric.Status.Conditions = []metav1.Condition{stored(t, cond)}
		client := fake.NewSimpleClientset(ric)
		informer := flotillainformers.NewSharedInformerFactory(client, 0).Config().V1alpha1().ResourceInterpreterCustomizations().Informer()
		if err := informer.GetIndexer().Add(ric); err != nil {
			t.Fatal(err)
		}
		c := NewController(client, informer, nil)
		client.ClearActions()
		if err := c.sync(context.Background(), ric.Name); err != nil {
			t.Fatal(err)
		}
		if actions := client.Actions(); len(actions) != 0 {
			t.Fatalf("pad %d: the stored condition was written again: %v", pad, actions)
		}
	}
}
