package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/hub/app"
	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/hub/admission"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// Issue 33 item 1: a customization whose rules do not compile or exceed the
// cost budget is refused when it is written, naming the field, by the
// webhook every hub replica serves. Helpers are prefixed wh.

const (
	whNamespace     = "flotilla-system"
	whSecret        = "flotilla-hub-webhook-cert"
	whConfiguration = "flotilla-hub"
)

// whInstallConfiguration creates the ValidatingWebhookConfiguration of
// manifests/hub/webhook.yaml (read, never copied) with its clientConfig
// turned to a URL on addr, as hack/local-up.sh registers the webhook of a
// hub run as a local process; and the namespace of the hub's Secret.
func whInstallConfiguration(t *testing.T, env *testenv.Env, addr string) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: whNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	objs, err := testenv.DecodeFile(filepath.Join(env.Root, "manifests", "hub", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, vwc); err != nil {
			t.Fatal(err)
		}
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + admission.ValidatePath)}
		}
		if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("manifests/hub/webhook.yaml has no ValidatingWebhookConfiguration")
}

// whRunHub runs a hub serving the webhook on addr until stop is called (or
// the test ends). Its leader election is on, against a Lease another
// replica holds for good: the webhook must not wait to lead.
func whRunHub(t *testing.T, env *testenv.Env, addr string, tune func(*app.Options)) (stop func()) {
	t.Helper()
	opts := app.NewOptions()
	opts.Kubeconfig = env.KubeconfigFor(t, env.Config)
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.LeaderElection.ResourceNamespace = whNamespace
	opts.Webhook.BindAddress, opts.Webhook.Port = splitHostPort(t, addr)
	if tune != nil {
		tune(opts)
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hub: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return host, port
}

// whHoldLease makes another replica the hub's leader for the test.
func whHoldLease(t *testing.T, env *testenv.Env) {
	t.Helper()
	le := app.NewOptions().LeaderElection
	_, err := env.Kube.CoordinationV1().Leases(whNamespace).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: le.ResourceName, Namespace: whNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// whWaitCABundle waits until every webhook of the configuration trusts the
// CA in the hub's Secret, and returns that CA.
func whWaitCABundle(t *testing.T, env *testenv.Env, what string) []byte {
	t.Helper()
	var ca []byte
	var last string
	if err := rbacPoll(30*time.Second, func() bool {
		secret, err := env.Kube.CoreV1().Secrets(whNamespace).Get(context.Background(), whSecret, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		ca = secret.Data[admission.CACertKey]
		vwc, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), whConfiguration, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		for _, wh := range vwc.Webhooks {
			if len(ca) == 0 || !bytes.Equal(wh.ClientConfig.CABundle, ca) {
				last = fmt.Sprintf("webhook %s has a caBundle of %d bytes, the Secret a CA of %d", wh.Name, len(wh.ClientConfig.CABundle), len(ca))
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%s: the configuration never trusted the Secret's CA: %s", what, last)
	}
	return ca
}

func whCustomization(name, health string) *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
			Customizations: configv1alpha1.CustomizationRules{
				HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: health},
			},
		},
	}
}

// whExpectRefused checks that err is the webhook's refusal naming each of
// wants.
func whExpectRefused(t *testing.T, err error, what string, wants ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s was admitted", what)
		return
	}
	msg := err.Error()
	if !apierrors.IsInvalid(err) || !strings.Contains(msg, `admission webhook "resourceinterpretercustomizations.config.flotilla.io" denied the request`) {
		t.Errorf("%s: refused, but not by the webhook as Invalid: %v", what, err)
	}
	for _, want := range wants {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: the refusal %q does not say %q", what, msg, want)
		}
	}
}

const whHealthField = "spec.customizations.healthInterpretation.expression"

// The refusals at `kubectl apply`: an expression that does not compile, one
// whose estimated cost exceeds the budget, and an update that makes a
// stored customization invalid; a valid one is stored. The hub serving
// the webhook is not the leader (another replica holds the Lease).
func TestWebhookRefusesCustomizationsThatDoNotCompile(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	addr := testenv.FreeAddr(t)
	whInstallConfiguration(t, env, addr)
	whHoldLease(t, env)
	whRunHub(t, env, addr, nil)
	whWaitCABundle(t, env, "first start")
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	rics := fc.ConfigV1alpha1().ResourceInterpreterCustomizations()
	ctx := context.Background()

	// The apiserver may call the webhook a moment before the configuration
	// change reaches its cache: the first write is retried until the
	// webhook answers (a refusal by the webhook), not a connection error.
	var err error
	if pollErr := rbacPoll(30*time.Second, func() bool {
		_, err = rics.Create(ctx, whCustomization("does-not-compile", "object.status.phase =="), metav1.CreateOptions{})
		return err == nil || strings.Contains(err.Error(), "denied the request")
	}); pollErr != nil {
		t.Fatalf("the webhook never answered: %v", err)
	}
	whExpectRefused(t, err, "an expression that does not compile", whHealthField, "Invalid value", "object.status.phase ==")
	t.Logf("what kubectl apply prints: %v", err)

	_, err = rics.Create(ctx, whCustomization("too-costly",
		`object.spec.a.all(x, object.spec.b.all(y, object.spec.c.all(z, x + y + z > 0)))`), metav1.CreateOptions{})
	whExpectRefused(t, err, "an expression over the cost budget", whHealthField, "exceeds the budget")
	t.Logf("what kubectl apply prints: %v", err)

	valid, err := rics.Create(ctx, whCustomization("valid", `object.status.phase == "Healthy"`), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a valid customization was refused: %v", err)
	}
	valid.Spec.Customizations.HealthInterpretation.Expression = "object.status.phase =="
	_, err = rics.Update(ctx, valid, metav1.UpdateOptions{})
	whExpectRefused(t, err, "an update to an expression that does not compile", whHealthField)
	stored, err := rics.Get(ctx, "valid", metav1.GetOptions{})
	if err != nil || stored.Spec.Customizations.HealthInterpretation.Expression != `object.status.phase == "Healthy"` {
		t.Errorf("the stored customization changed: %v %+v", err, stored)
	}
	// Tenants are never affected: nothing else goes through the webhook.
	if _, err := env.Kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "untouched"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("a ConfigMap: %v", err)
	}
}

// The certificate survives a restart (the Secret is reused: same CA, no
// caBundle change), a caBundle removed by hand is put back, and a deleted
// Secret is made anew with a new CA that the configuration then trusts.
func TestWebhookCertificateSurvivesRestartsAndRepairs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	addr := testenv.FreeAddr(t)
	whInstallConfiguration(t, env, addr)
	ctx := context.Background()
	tune := func(o *app.Options) { o.LeaderElection.LeaderElect = false }
	// Two replicas start together and race to create the Secret; both
	// serve the one certificate it ends up holding.
	otherAddr := testenv.FreeAddr(t)
	stop := whRunHub(t, env, addr, tune)
	stopOther := whRunHub(t, env, otherAddr, tune)
	ca := whWaitCABundle(t, env, "first start")
	first, err := env.Kube.CoreV1().Secrets(whNamespace).Get(ctx, whSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{addr, otherAddr} {
		whWaitServing(t, a, first.Data)
	}
	stop()
	stopOther()

	whRunHub(t, env, addr, tune)
	if again := whWaitCABundle(t, env, "restart"); !bytes.Equal(again, ca) {
		t.Error("a restarted hub made a new CA instead of reusing the Secret's")
	}
	// Serving: the restarted hub refuses with the Secret's certificate.
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	var refusal error
	if pollErr := rbacPoll(30*time.Second, func() bool {
		_, refusal = fc.ConfigV1alpha1().ResourceInterpreterCustomizations().Create(ctx, whCustomization("bad", "object =="), metav1.CreateOptions{})
		return refusal != nil && strings.Contains(refusal.Error(), "denied the request")
	}); pollErr != nil {
		t.Fatalf("the restarted hub's webhook never refused: %v", refusal)
	}
	if now, err := env.Kube.CoreV1().Secrets(whNamespace).Get(ctx, whSecret, metav1.GetOptions{}); err != nil || now.ResourceVersion != first.ResourceVersion {
		t.Errorf("the restart rewrote the Secret: %v", err)
	}

	// An admin removes the caBundle (or re-applies the manifest without it).
	patch := []byte(`[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]`)
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, whConfiguration, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	whWaitCABundle(t, env, "caBundle removed")

	// The Secret is deleted: a new CA, trusted by the configuration.
	if err := env.Kube.CoreV1().Secrets(whNamespace).Delete(ctx, whSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var renewed []byte
	if pollErr := rbacPoll(30*time.Second, func() bool {
		renewed = whWaitCABundle(t, env, "Secret deleted")
		return !bytes.Equal(renewed, ca)
	}); pollErr != nil {
		t.Fatal("a deleted Secret was not made anew with a new CA")
	}
}

// whWaitServing waits until the webhook at addr serves the Secret data's
// certificate, trusted by its CA for the Service's name.
func whWaitServing(t *testing.T, addr string, data map[string][]byte) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[admission.CACertKey]) {
		t.Fatal("no CA in the Secret")
	}
	want, _ := pem.Decode(data[corev1.TLSCertKey])
	if want == nil {
		t.Fatal("no certificate in the Secret")
	}
	var last error
	if err := rbacPoll(30*time.Second, func() bool {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: roots, ServerName: "flotilla-hub-webhook.flotilla-system.svc"})
		if err != nil {
			last = err
			return false
		}
		defer func() { _ = conn.Close() }()
		if got := conn.ConnectionState().PeerCertificates[0].Raw; !bytes.Equal(got, want.Bytes) {
			last = fmt.Errorf("serves another certificate than the Secret's")
			return false
		}
		return true
	}); err != nil {
		t.Fatalf("the webhook at %s: %v", addr, last)
	}
}
