package manifeststest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// tree is the KustomizeTree every test renders, made once per run.
var tree struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tree.dir != "" {
		os.RemoveAll(tree.dir)
	}
	os.Exit(code)
}

// renderRoot is a copy of the repository's kustomizations whose agent
// overlays have their placeholder hub.kubeconfig (KustomizeTree): the
// checkout has none in git, and any real one stays out of the tests.
func renderRoot(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	tree.once.Do(func() {
		if tree.dir, tree.err = os.MkdirTemp("", "flotilla-manifeststest-"); tree.err != nil {
			return
		}
		tree.err = KustomizeTree(root, tree.dir)
	})
	if tree.err != nil {
		t.Fatal(fmt.Errorf("copying the kustomizations: %w", tree.err))
	}
	return tree.dir
}
