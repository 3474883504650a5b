// Package e2e holds Flotilla's end-to-end Ginkgo specs. They run against an
// environment from the provider E2E_PROVIDER names (see e2e/framework).
package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flotilla-io/flotilla/e2e/framework"
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
