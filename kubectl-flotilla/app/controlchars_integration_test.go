package app_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	hubapp "github.com/flotilla-io/flotilla/hub/app"
	"github.com/flotilla-io/flotilla/kubectl-flotilla/app"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Issue 30 item 10: what the plugin did not write reaches the terminal
// without control sequences. member1's agent writes an Applied=False
// message that clears the screen, sets the clipboard (OSC 52), rings the
// bell, returns the carriage and reverses the text (U+202E), and an event
// on the template carries the same in its reason and message. `kubectl
// flotilla where` shows them escaped, visibly, and never emits a control
// character but the newline ending each line.
func TestKubectlFlotillaEscapesControlCharacters(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	kubeconfig := env.KubeconfigFor(t, env.Config)
	opts := hubapp.NewOptions()
	opts.Kubeconfig = kubeconfig
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.ClusterStartupGracePeriod, opts.ClusterMonitorGracePeriod = time.Hour, time.Hour
	opts.BindingStatusHold = time.Second
	done := make(chan error, 1)
	go func() { done <- hubapp.Run(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	fc := flotillaclient.NewForConfigOrDie(env.Config)

	created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pluginTestUntil(t, "member1 Ready", func() (bool, error) {
		cur, err := fc.ClusterV1alpha1().Clusters().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
			Status: metav1.ConditionTrue, Reason: "ClusterReady", Message: "set by the test"})
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	ns := "default"
	tmpl := &workv1alpha1.ResourceTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workv1alpha1.ResourceTemplateSpec{Manifest: workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(pluginTestManifest)}}}}
	if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
		}}
	if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const hostile = "boom\x1b[2J\x1b]52;c;aGk=\x07\rfake OK \u202eevil\u0085"
	binding := "nginx-deployment"
	pluginTestUntil(t, "member1's agent reports a hostile message", func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works(clusterlifecycle.Namespace("member1")).Get(ctx, workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionFalse,
			Reason: "ApplyFailed", Message: hostile, ObservedGeneration: w.Generation})
		_, err = fc.WorkV1alpha1().Works(w.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if _, err := env.Kube.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.hostile", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: workv1alpha1.SchemeGroupVersion.String(), Kind: "ResourceTemplate", Namespace: ns, Name: "web"},
		Reason:         "Evil\x1b[31m", Message: "event " + hostile, Type: corev1.EventTypeWarning, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "someone"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var out string
	pluginTestUntil(t, "where shows the agent's message and the event", func() (bool, error) {
		var buf, errOut bytes.Buffer
		cmd := app.NewCommand(&buf, &errOut)
		cmd.SetArgs([]string{"where", "deploy/nginx", "-n", ns, "--kubeconfig", kubeconfig})
		if err := cmd.ExecuteContext(ctx); err != nil {
			return false, nil
		}
		out = buf.String()
		return strings.Count(out, "fake OK") >= 2 && strings.Contains(out, "event boom"), nil
	}, func() string { return out })
	t.Logf("kubectl flotilla where deploy/nginx\n%q", out)
	for i, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e') {
			t.Fatalf("output has %U at byte %d: %q", r, i, out)
		}
	}
	for _, want := range []string{`boom\x1b[2J\x1b]52;c;aGk=\x07\x0dfake OK \u202eevil\u0085`, `Evil\x1b[31m`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks the visibly escaped %s:\n%s", want, out)
		}
	}
}
