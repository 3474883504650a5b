package binding

import (
	"fmt"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// A tenant's large templates cannot grow the hub's memory through the
// revisions it keeps in memory: at most revisionCacheEntries, none larger
// than revisionCacheBytes.
func TestRevisionCacheIsBounded(t *testing.T) {
	r := NewRevisions(fake.NewClientset(), "flotilla-system")
	r.remember("big", make([]byte, revisionCacheBytes+1))
	if _, ok := r.objects.Get("big"); ok {
		t.Fatal("a revision larger than revisionCacheBytes was kept in memory")
	}
	for i := 0; i < 4*revisionCacheEntries; i++ {
		r.remember(fmt.Sprint(i), make([]byte, revisionCacheBytes))
	}
	if n := r.objects.Len(); n > revisionCacheEntries {
		t.Fatalf("%d revisions kept in memory, want at most %d", n, revisionCacheEntries)
	}
}
