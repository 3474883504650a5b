package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/hub/app"
	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

const karmadaInterpretersDir = "../../pkg/wrap/testdata/karmada-interpreters/"

// Issue 33 item 5: Karmada's shipped ResourceInterpreterCustomizations,
// converted by `hub wrap --from-karmada`, are admitted by the hub's
// webhook and compile on the hub (Compiled=True), the Kruise kinds'
// dependency rules (podTemplateDependencies) included. What does not
// convert is reported by wrap and left out, so --allow-unsupported.
func TestWrapKarmadaCustomizationsAdmittedAndCompiled(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	addr := testenv.FreeAddr(t)
	whInstallConfiguration(t, env, addr)
	// The only replica: it serves the webhook and leads (the Compiled
	// condition is the leader's).
	whRunHub(t, env, addr, func(o *app.Options) { o.LeaderElection.LeaderElect = false })
	whWaitCABundle(t, env, "start")
	rics := flotillaclient.NewForConfigOrDie(env.Config).ConfigV1alpha1().ResourceInterpreterCustomizations()
	ctx := context.Background()

	// The webhook answers (an admission here would prove nothing).
	var err error
	if pollErr := rbacPoll(30*time.Second, func() bool {
		_, err = rics.Create(ctx, whCustomization("does-not-compile", "object.status.phase =="), metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "denied the request")
	}); pollErr != nil {
		t.Fatalf("the webhook never refused: %v", err)
	}

	out := hubWrap(t, "wrap", "--from-karmada", "--allow-unsupported", "-f", karmadaInterpretersDir)
	var names []string
	withDependencies := 0
	for _, obj := range decodeFlotillaStream(t, out) {
		ric, ok := obj.(*configv1alpha1.ResourceInterpreterCustomization)
		if !ok {
			t.Fatalf("wrap wrote a %T", obj)
		}
		if _, err := rics.Create(ctx, ric, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s refused: %v", ric.Name, err)
			continue
		}
		names = append(names, ric.Name)
		if d := ric.Spec.Customizations.DependencyInterpretation; d != nil {
			withDependencies++
			if !strings.Contains(d.Expression, "podTemplateDependencies(") {
				t.Errorf("%s: dependencies %q", ric.Name, d.Expression)
			}
		}
	}
	// Ten vendored, nine convert something (RayCluster nothing); three
	// (Kruise CloneSet, BroadcastJob, UnitedDeployment) declare their
	// dependencies with kube.getPodDependencies.
	if len(names) != 9 || withDependencies != 3 {
		t.Fatalf("admitted %d customizations, %d with dependencies; want 9 and 3: %v", len(names), withDependencies, names)
	}

	for _, name := range names {
		var last string
		if err := rbacPoll(30*time.Second, func() bool {
			ric, err := rics.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false
			}
			for _, c := range ric.Status.Conditions {
				if c.Type == configv1alpha1.ConditionCompiled {
					last = string(c.Status) + " " + c.Reason + ": " + c.Message
					if c.ObservedGeneration != ric.Generation {
						return false
					}
					if c.Status != metav1.ConditionTrue {
						t.Errorf("%s: Compiled %s", name, last)
					}
					return true
				}
			}
			last = "no Compiled condition"
			return false
		}); err != nil {
			t.Errorf("%s: %s", name, last)
		}
	}
}
