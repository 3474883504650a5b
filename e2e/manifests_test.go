package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
	"github.com/flotilla-io/flotilla/pkg/manifeststest"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The environment runs the hub and agents as processes (no container
// runtime), so the shipped manifests are proven here the other way: every
// object of the kustomizations users apply must be accepted by a real
// apiserver (server-side dry run: schema, defaulting, admission, RBAC's
// escalation checks on the roles), and the hub's RBAC plus its admission
// policy must let the hub do its job and nothing outside Flotilla's objects.
//
// flotilla-system exists before the dry runs: hack/local-up.sh applies
// kustomize/hub on the hub (which holds the Namespace) and creates the
// namespace in every member for the agent processes. A server-side dry run
// does not create the Namespace it lists first, so on a fresh cluster the
// namespaced objects would be refused for a missing namespace; here they are
// checked against the real one.
var _ = Describe("Manifests", func() {
	It("are accepted by the hub's apiserver (server-side dry run of kustomize/hub and kustomize/hub-dns-traffic)", func(ctx SpecContext) {
		for _, dir := range []string{"kustomize/hub", "kustomize/hub-dns-traffic"} {
			accepted := dryRunApply(ctx, env.HubContext, dir)
			Expect(kindsOf(accepted)).To(ContainElements("CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole",
				"ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
				"Deployment", "PodDisruptionBudget", "Service"), dir)
		}
	})

	It("are accepted by a member's apiserver (server-side dry run of kustomize/agent/overlays/member1)", func(ctx SpecContext) {
		accepted := dryRunApply(ctx, env.Members[0].Context, "kustomize/agent/overlays/member1")
		Expect(kindsOf(accepted)).To(ContainElements("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
			"Role", "RoleBinding", "Deployment", "PodDisruptionBudget", "DaemonSet", "Secret",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"))
	})

	It("let the hub's ServiceAccount grant agents their rules, and keep its writes to Flotilla's namespaces and names", func(ctx SpecContext) {
		// The RBAC and admission policy are put in place for real (local-up
		// installs only the API; the Deployment's pods stay Pending on kwok).
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl"), "--kubeconfig", env.Kubeconfig, "--context", env.HubContext,
			"apply", "--server-side", "--force-conflicts", "-k", filepath.Join(root, "kustomize/hub")).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		// kustomize/hub's webhook configuration calls the hub through its
		// Service, which has no pods here: put back the one
		// hack/local-up.sh registered (the local hub's URL; the same field
		// manager, so the Service reference goes), or customizations could
		// no longer be written. The hub keeps the caBundle either way.
		if local := filepath.Join(env.StateDir, "hub-webhook.yaml"); env.StateDir != "" {
			if _, statErr := os.Stat(local); statErr == nil {
				out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl"), "--kubeconfig", env.Kubeconfig, "--context", env.HubContext,
					"apply", "--server-side", "--force-conflicts", "-f", local).CombinedOutput()
				Expect(err).NotTo(HaveOccurred(), "%s", out)
			}
		}

		cfg, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		cfg = rest.CopyConfig(cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:flotilla-system:flotilla-hub",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:flotilla-system", "system:authenticated"}}
		hub, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		clusterNS := clusterlifecycle.Namespace(env.Members[0].Name) // made by the hub for member1

		By("granting what cluster-lifecycle grants an agent, without escalate or bind")
		eventually(ctx, func(g Gomega) {
			_, err := hub.RbacV1().Roles(clusterNS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-agent-e2e-dry-run"},
				Rules: clusterlifecycle.AgentNamespaceRules(env.Members[0].Name)}, dryRun)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = hub.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: clusterlifecycle.AgentClusterRoleName("e2e-dry-run")},
				Rules: clusterlifecycle.AgentClusterRules("e2e-dry-run")}, dryRun)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterlifecycle.Namespace("e2e-dry-run")}}, dryRun)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())

		By("refusing the same writes outside Flotilla's namespaces and names (admission policy flotilla-hub-scope)")
		// Policies take effect asynchronously after they are applied: poll.
		eventually(ctx, func(g Gomega) {
			_, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-flotilla"}}, dryRun)
			g.Expect(forbiddenBy(err, "flotilla-hub-scope")).To(BeTrue(), "namespace e2e-not-flotilla: %v", err)
			// (kube-system itself is immortal: NamespaceLifecycle refuses first.)
			err = hub.CoreV1().Namespaces().Delete(ctx, "kube-node-lease", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			g.Expect(forbiddenBy(err, "flotilla-hub-scope")).To(BeTrue(), "delete namespace kube-node-lease: %v", err)
			_, err = hub.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-flotilla"}}, dryRun)
			g.Expect(forbiddenBy(err, "flotilla-hub-scope")).To(BeTrue(), "lease in kube-system: %v", err)
			_, err = hub.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-flotilla"}}, dryRun)
			g.Expect(forbiddenBy(err, "flotilla-hub-scope")).To(BeTrue(), "cluster role e2e-not-flotilla: %v", err)
			_, err = hub.RbacV1().Roles("kube-system").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-flotilla"}}, dryRun)
			g.Expect(forbiddenBy(err, "flotilla-hub-scope")).To(BeTrue(), "role in kube-system: %v", err)
		}).Should(Succeed())

		By("holding nothing it does not use (RBAC)")
		_, err = hub.CoreV1().Secrets(clusterNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2e-dry-run"}}, dryRun)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "secrets: %v", err)
		// Tokens: only the agent's own ServiceAccount, only in cluster
		// namespaces (it holds that rule to grant agents their renewal).
		_, err = hub.CoreV1().ServiceAccounts(clusterNS).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, dryRun)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "serviceaccounts/token of another ServiceAccount: %v", err)
		// A flotilla-agent ServiceAccount outside the cluster namespaces (the
		// token API looks the ServiceAccount up before admission runs).
		admin, err := env.RestConfig(env.HubContext)
		Expect(err).NotTo(HaveOccurred())
		adminKube, err := kubernetes.NewForConfig(admin)
		Expect(err).NotTo(HaveOccurred())
		_, err = adminKube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: clusterlifecycle.AgentServiceAccount}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		DeferCleanup(func(ctx context.Context) {
			_ = adminKube.CoreV1().ServiceAccounts("default").Delete(ctx, clusterlifecycle.AgentServiceAccount, metav1.DeleteOptions{})
		})
		_, err = hub.CoreV1().ServiceAccounts("default").CreateToken(ctx, clusterlifecycle.AgentServiceAccount, &authenticationv1.TokenRequest{}, dryRun)
		Expect(forbiddenBy(err, "flotilla-hub-scope")).To(BeTrue(), "serviceaccounts/token outside flotilla-es-*: %v", err)
	})
})

// dryRunApply server-side dry-run applies a kustomization to a context and
// checks that the apiserver returned every rendered object, by kind,
// namespace and name. It returns the accepted objects. It applies a copy
// of the kustomizations whose agent overlays have their placeholder
// hub.kubeconfig (manifeststest.KustomizeTree): none is in git.
func dryRunApply(ctx context.Context, kubeContext, dir string) []unstructured.Unstructured {
	GinkgoHelper()
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	kubectl := filepath.Join(root, "bin", "kubectl")
	tree := GinkgoT().TempDir()
	Expect(manifeststest.KustomizeTree(root, tree)).To(Succeed())
	path := filepath.Join(tree, dir)

	rendered, err := exec.CommandContext(ctx, kubectl, "kustomize", path).Output()
	Expect(err).NotTo(HaveOccurred(), "kubectl kustomize %s: %v", dir, stderrOf(err))
	var want []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else {
			Expect(err).NotTo(HaveOccurred(), "decoding kubectl kustomize %s", dir)
		}
		if len(u.Object) > 0 {
			want = append(want, objectKey(&u))
		}
	}
	Expect(want).NotTo(BeEmpty(), "%s renders nothing", dir)

	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", env.Kubeconfig, "--context", kubeContext,
		"apply", "--server-side", "--dry-run=server", "-o", "json", "-k", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "kubectl apply --dry-run=server -k %s (context %s):\n%s", dir, kubeContext, stderr.String())

	var result unstructured.Unstructured
	Expect(json.Unmarshal(out, &result.Object)).To(Succeed(), "kubectl apply -o json output")
	var accepted []unstructured.Unstructured
	if result.IsList() {
		list, err := result.ToList()
		Expect(err).NotTo(HaveOccurred())
		accepted = list.Items
	} else {
		accepted = []unstructured.Unstructured{result}
	}
	var got []string
	for i := range accepted {
		got = append(got, objectKey(&accepted[i]))
	}
	Expect(got).To(ConsistOf(want), "objects the apiserver accepted vs. objects %s renders", dir)
	return accepted
}

func objectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

func kindsOf(objs []unstructured.Unstructured) []string {
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	return kinds
}

// forbiddenBy reports whether err is a Forbidden from the named admission
// policy (not from RBAC).
func forbiddenBy(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), policy)
}

func stderrOf(err error) string {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return string(exitErr.Stderr)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}
