package clusterstatus

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
)

// etagServer serves /api and /apis with an ETag (none when etag is "") and
// answers 304 to a matching If-None-Match, as kube-apiserver's aggregated
// discovery does.
func etagServer(t *testing.T, etag *atomic.Value, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api" && r.URL.Path != "/apis" {
			http.NotFound(w, r)
			return
		}
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		tag := etag.Load().(string)
		if tag != "" {
			quoted := `"` + tag + r.URL.Path + `"`
			w.Header().Set("ETag", quoted)
			if r.Header.Get("If-None-Match") == quoted {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIGroupList","groups":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProbeDiscoveryETags(t *testing.T) {
	var etag atomic.Value
	etag.Store("v1")
	client := restClientFor(t, etagServer(t, &etag, http.StatusOK).URL)

	tags, unchanged, err := ProbeDiscoveryETags(t.Context(), client, DiscoveryETags{})
	if err != nil || unchanged || tags != (DiscoveryETags{`"v1/api"`, `"v1/apis"`}) {
		t.Fatalf("first probe: got %q unchanged=%v err=%v, want both ETags, changed", tags, unchanged, err)
	}
	again, unchanged, err := ProbeDiscoveryETags(t.Context(), client, tags)
	if err != nil || !unchanged || again != tags {
		t.Fatalf("same documents: got %q unchanged=%v err=%v, want unchanged", again, unchanged, err)
	}
	etag.Store("v2")
	moved, unchanged, err := ProbeDiscoveryETags(t.Context(), client, tags)
	if err != nil || unchanged || moved != (DiscoveryETags{`"v2/api"`, `"v2/apis"`}) {
		t.Fatalf("changed documents: got %q unchanged=%v err=%v, want the new ETags, changed", moved, unchanged, err)
	}

	// A server without ETags (legacy discovery) is never unchanged.
	etag.Store("")
	none, unchanged, err := ProbeDiscoveryETags(t.Context(), client, moved)
	if err != nil || unchanged || none.Complete() {
		t.Fatalf("no ETags: got %q unchanged=%v err=%v, want incomplete, changed", none, unchanged, err)
	}
	if _, unchanged, _ := ProbeDiscoveryETags(t.Context(), client, none); unchanged {
		t.Fatal("no ETags: an incomplete set must never count as unchanged")
	}

	// An error answer is an error, not "unchanged".
	failing := restClientFor(t, etagServer(t, &etag, http.StatusInternalServerError).URL)
	if _, unchanged, err := ProbeDiscoveryETags(t.Context(), failing, tags); err == nil || unchanged {
		t.Fatalf("500: got unchanged=%v err=%v, want an error", unchanged, err)
	}
	// A client that is not a REST client (a fake) knows nothing.
	if tags, unchanged, err := ProbeDiscoveryETags(t.Context(), nil, tags); err != nil || unchanged || tags.Complete() {
		t.Fatalf("nil client: got %q unchanged=%v err=%v", tags, unchanged, err)
	}
}

// countingDiscovery counts full discoveries.
type countingDiscovery struct {
	discovery.DiscoveryInterface
	full atomic.Int32
}

func (d *countingDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.full.Add(1)
	return d.DiscoveryInterface.ServerGroupsAndResources()
}

// Without a REST client to probe (the fake), every period discovers in full,
// as before the cache.
func TestAPICacheWithoutETagsDiscoversEveryTime(t *testing.T) {
	d := &countingDiscovery{DiscoveryInterface: fake.NewClientset().Discovery()}
	var c apiCache
	for range 3 {
		if _, err := c.discoverAPIs(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.full.Load(); got != 3 {
		t.Fatalf("full discoveries: got %d, want 3", got)
	}
}
