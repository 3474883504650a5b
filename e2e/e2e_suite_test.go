// Package e2e holds Flotilla's end-to-end Ginkgo specs. They run against an
// environment from the provider E2E_PROVIDER names (see e2e/framework).
package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/e2e/framework"
	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

var (
	provider framework.Provider
	env      *framework.Environment
)

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: needs a running environment (run without -short)")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Flotilla e2e")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	provider, err = framework.NewProvider(root)
	Expect(err).NotTo(HaveOccurred())
	env, err = provider.Up(ctx)
	Expect(err).NotTo(HaveOccurred())
	// Up returns once every process answers; the specs start when the hub
	// also holds every member Ready and untainted (a member not yet Ready
	// is tainted not-ready:NoSchedule, and a spec's first schedule would
	// leave it out).
	cfg, err := env.RestConfig(env.HubContext)
	Expect(err).NotTo(HaveOccurred())
	flotilla, err := flotillaclient.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	Eventually(ctx, func(g Gomega) {
		for _, m := range env.Members {
			c, err := flotilla.ClusterV1alpha1().Clusters().Get(ctx, m.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)).To(BeTrue(), "%s Ready", m.Name)
			g.Expect(c.Spec.Taints).To(BeEmpty(), "%s taints", m.Name)
		}
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
}, NodeTimeout(15*time.Minute)) // local: ~1–2 min; kind (cold): clusters plus an image build

var _ = AfterSuite(func(ctx SpecContext) {
	if provider != nil {
		Expect(provider.Down(ctx)).To(Succeed())
	}
}, NodeTimeout(2*time.Minute))

// eventually polls f until it succeeds, with the suite's default deadline.
func eventually(ctx context.Context, f any) AsyncAssertion {
	return Eventually(ctx, f).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond)
}
