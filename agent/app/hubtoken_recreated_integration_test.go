package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/agent/hubtoken"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// recreateAgentServiceAccount deletes the agent's ServiceAccount and makes
// it again (a new UID: the apiserver refuses every token of the old one), as
// the hub does when it was deleted, and waits until token refuses.
func (f *fleet) recreateAgentServiceAccount(t *testing.T, token string) {
	t.Helper()
	ctx := context.Background()
	sas := f.hub.Kube.CoreV1().ServiceAccounts(f.clusterNamespace)
	if err := sas.Delete(ctx, clusterlifecycle.AgentServiceAccount, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, func() error {
		_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: clusterlifecycle.AgentServiceAccount}}, metav1.CreateOptions{})
		return err
	})
	poll(t, 30*time.Second, "the old ServiceAccount's token to be refused", func() bool {
		_, err := f.tokenClient(token).CoordinationV1().Leases(f.clusterNamespace).Get(ctx, f.clusterName, metav1.GetOptions{})
		return apierrors.IsUnauthorized(err)
	})
}

// agentToken is what `hub agent-kubeconfig` puts in the kubeconfig: a
// TokenRequest token of the agent's ServiceAccount.
func (f *fleet) agentToken(t *testing.T) string {
	t.Helper()
	tr, err := f.hub.Kube.CoreV1().ServiceAccounts(f.clusterNamespace).CreateToken(context.Background(), clusterlifecycle.AgentServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// writeFile replaces path atomically (a rename, as kubelet updates a
// mounted Secret and as a careful CronJob writes).
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Issue 30 item 9: the hub re-creates the agent's ServiceAccount (it was
// deleted), so the apiserver refuses every token of the old one; the admin
// hands out a token of the new one. The running agent adopts it without a
// restart: first in the token file its kubeconfig names (`hub
// agent-kubeconfig --token-file`), then, after a second re-creation, inline
// in the kubeconfig file itself (a kubeconfig Secret updated in place).
//
// Before: the agent read the token file only at its renewal point (80% of
// a 1h token's life here) and then refused a token of another
// ServiceAccount UID; the Lease stayed stale until a restart.
func TestAgentAdoptsATokenOfItsRecreatedServiceAccountWithoutARestart(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.register(t, f.memberKubeSystem, true)
	f.createAgentIdentity(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	first := f.agentToken(t)
	writeFile(t, tokenFile, []byte(first))
	cfg := rest.AnonymousClientConfig(f.hub.Config)
	cfg.BearerTokenFile = tokenFile
	kubeconfig, err := testenv.Kubeconfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(dir, "hub.kubeconfig")
	writeFile(t, kubeconfigPath, kubeconfig)

	opts := f.fastOptions("node-a")
	opts.HubKubeconfig = kubeconfigPath
	opts.HubTokenFile = filepath.Join(dir, "persisted-token")
	opts.MetricsBindAddress = testenv.FreeAddr(t)
	runStoppableAgent(t, opts)
	poll(t, 30*time.Second, "the agent's first Lease renewal", func() bool { return !f.renewTime(t).IsZero() })
	renewInterval := time.Duration(float64(opts.ClusterLeaseDuration) * opts.ClusterLeaseRenewIntervalFraction)

	adopted := func(what, token string) {
		t.Helper()
		tok, err := hubtoken.Parse(token)
		if err != nil {
			t.Fatal(err)
		}
		handedOut := time.Now()
		// A Lease renewal after the new token was handed out: only the new
		// token can make one (the old is refused).
		poll(t, 30*time.Second, "a Lease renewal with "+what, func() bool { return f.renewTime(t).After(handedOut.Add(renewInterval)) })
		if exp, ok := tokenMetric(t, opts.MetricsBindAddress, "flotilla_agent_hub_token_expiration_timestamp_seconds"); !ok || exp != float64(tok.Expiry.Unix()) {
			t.Errorf("after %s the agent reports a token expiring at %v, want the new one's %v", what, exp, tok.Expiry.Unix())
		}
		t.Logf("%s adopted %s after it was handed out", what, time.Since(handedOut).Round(100*time.Millisecond))
	}

	// 1. The token file.
	f.recreateAgentServiceAccount(t, first)
	second := f.agentToken(t)
	writeFile(t, tokenFile, []byte(second))
	adopted("the re-created ServiceAccount's token in the token file", second)

	// 2. The kubeconfig itself, now with the token inline.
	f.recreateAgentServiceAccount(t, second)
	third := f.agentToken(t)
	cfg.BearerTokenFile, cfg.BearerToken = "", third
	if kubeconfig, err = testenv.Kubeconfig(cfg); err != nil {
		t.Fatal(err)
	}
	writeFile(t, kubeconfigPath, kubeconfig)
	adopted("the re-created ServiceAccount's token inline in the kubeconfig", third)

}
