package clusterlifecycle_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The hub holds serviceaccounts/token create on flotilla-agent only so that
// it may grant it to each agent (RBAC refuses to let it grant what it does
// not hold). With the shipped RBAC and admission policy (manifests/hub), the
// hub's ServiceAccount can request a token for an agent identity
// (flotilla-es-*/flotilla-agent) and for nothing else: not for a
// flotilla-agent ServiceAccount elsewhere (on a host that is also a member,
// that would be the member agent's identity), not for another name.
func TestHubMayMintOnlyAgentTokens(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	for _, ns := range []string{"flotilla-system", clusterlifecycle.Namespace("member1"), "elsewhere"} {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sa := range []struct{ ns, name string }{
		{clusterlifecycle.Namespace("member1"), clusterlifecycle.AgentServiceAccount},
		{clusterlifecycle.Namespace("member1"), "other"},
		{"elsewhere", clusterlifecycle.AgentServiceAccount},
	} {
		if _, err := env.Kube.CoreV1().ServiceAccounts(sa.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"rbac.yaml", "admission-policy.yaml"} {
		if err := env.ApplyFile(ctx, filepath.Join(env.Root, "manifests", "hub", f)); err != nil {
			t.Fatal(err)
		}
	}
	hubCfg := rest.CopyConfig(env.Config)
	hubCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:flotilla-system:flotilla-hub",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:flotilla-system", "system:authenticated"}}
	hub := kubernetes.NewForConfigOrDie(hubCfg)
	request := func(ns, name string) error { return requestToken(hub, ns, name) }
	// The policy takes effect asynchronously: wait until it refuses.
	var err error
	if pollErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		err = request("elsewhere", clusterlifecycle.AgentServiceAccount)
		return err != nil, nil
	}); pollErr != nil {
		t.Fatalf("the hub may request a token for elsewhere/flotilla-agent: the admission policy does not fence it")
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "flotilla-hub-scope") {
		t.Fatalf("token for elsewhere/flotilla-agent: want a refusal by policy flotilla-hub-scope, got %v", err)
	}
	if err := request(clusterlifecycle.Namespace("member1"), clusterlifecycle.AgentServiceAccount); err != nil {
		t.Fatalf("the hub cannot request the agent's token (so it could not grant renewal to agents): %v", err)
	}
	if err := request(clusterlifecycle.Namespace("member1"), "other"); !apierrors.IsForbidden(err) {
		t.Fatalf("token for another ServiceAccount of the cluster namespace: want Forbidden by RBAC, got %v", err)
	}
}

// requestToken asks for a 10-minute token of ServiceAccount ns/name.
func requestToken(kube kubernetes.Interface, ns, name string) error {
	_, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	return err
}
