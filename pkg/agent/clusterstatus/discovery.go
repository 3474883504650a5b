package clusterstatus

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// discoveryPaths are the member's two aggregated discovery documents: the
// core group and every other group (kube-aggregator's merge, APIServices
// included).
var discoveryPaths = [2]string{"/api", "/apis"}

// discoveryAccept asks for aggregated discovery (v2, else v2beta1), the form
// the apiserver serves with an ETag; a server that falls back to the legacy
// form sends none, and is discovered in full every period.
const discoveryAccept = discovery.AcceptV2 + "," + discovery.AcceptV2Beta1 + "," + discovery.AcceptV1

// DiscoveryETags are the ETags of the two aggregated discovery documents
// (/api, /apis). An ETag is a hash of the document: equal ETags, equal API
// enablements.
type DiscoveryETags [2]string

// Complete reports whether both documents had an ETag, so that a later
// If-None-Match can tell they did not change.
func (e DiscoveryETags) Complete() bool { return e[0] != "" && e[1] != "" }

// ProbeDiscoveryETags asks the member for its aggregated discovery
// documents with If-None-Match: known. unchanged is true only when the
// apiserver answered 304 Not Modified for both — the documents, and so the
// API enablements discovered with them, are what they were. Otherwise tags
// holds the ETags the apiserver sent now ("" where it sent none) and the
// caller discovers again; the body of a changed document is not read here.
// client must be a *rest.RESTClient (its HTTP client carries the
// credentials); for any other, nothing is known (tags empty).
func ProbeDiscoveryETags(ctx context.Context, client rest.Interface, known DiscoveryETags) (tags DiscoveryETags, unchanged bool, err error) {
	rc, ok := client.(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil {
		return DiscoveryETags{}, false, nil
	}
	unchanged = known.Complete()
	for i, path := range discoveryPaths {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rc.Get().AbsPath(path).URL().String(), nil)
		if err != nil {
			return DiscoveryETags{}, false, err
		}
		req.Header.Set("Accept", discoveryAccept)
		if known.Complete() {
			req.Header.Set("If-None-Match", known[i])
		}
		resp, err := rc.Client.Do(req)
		if err != nil {
			return DiscoveryETags{}, false, err
		}
		// Not read: a changed document is fetched (and parsed) by the
		// full discovery that follows.
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusNotModified:
			tags[i] = known[i]
		case http.StatusOK:
			unchanged = false
			tags[i] = resp.Header.Get("ETag")
		default:
			return DiscoveryETags{}, false, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	return tags, unchanged, nil
}

// apiCache holds the API enablements last discovered in full, with the
// ETags the documents had just before: while both still match, the
// enablements are reused without fetching and parsing the documents again
// (the largest part of an idle leader's CPU).
type apiCache struct {
	etags DiscoveryETags
	apis  []clusterv1alpha1.APIEnablement
}

// reusable reports whether the cache can answer for a probe that found the
// documents unchanged.
func (c *apiCache) reusable(unchanged bool) bool {
	return unchanged && c.apis != nil && c.etags.Complete()
}

// discoverAPIs returns the member's API enablements: the cached ones when
// the discovery documents did not change, else a full discovery, cached only
// when it was complete (a partial answer — an aggregated API down — is
// discovered again next period, as before) and the documents had ETags.
// reused says the cached enablements were returned (nothing changed).
// Callers must not modify the returned slice.
func (c *apiCache) discoverAPIs(ctx context.Context, member discovery.DiscoveryInterface) (apis []clusterv1alpha1.APIEnablement, reused bool, err error) {
	tags, unchanged, probeErr := ProbeDiscoveryETags(ctx, member.RESTClient(), c.etags)
	if probeErr == nil && c.reusable(unchanged) {
		return c.apis, true, nil
	}
	apis, err = DiscoverAPIEnablements(member)
	switch {
	case err == nil && probeErr == nil && tags.Complete():
		// The ETags were read before the full discovery: a change in
		// between makes the next probe see new ETags, never the reverse.
		c.etags, c.apis = tags, apis
	default:
		c.etags, c.apis = DiscoveryETags{}, nil
	}
	return apis, false, err
}

// versionEvery is how many status periods the member's version may be
// reused: /version is read again at the latest every versionEvery-th period
// (once a minute with the default 10s).
const versionEvery = 6

// versionCache holds the member's version between status periods: it
// changes only with a new apiserver binary, which comes with a restart.
type versionCache struct {
	version string
	age     int  // status periods since it was read, this one included
	stale   bool // the apiserver probe failed since (it may have restarted)
}

// NeedVersion reports whether /version must be read this period: nothing is
// known yet, the apiserver probe failed since the last read (an upgrade
// restarts the apiserver), the discovery documents changed (a new minor
// version serves other APIs), or versionEvery periods passed (a patch
// upgrade of an apiserver that never looked unready, behind a load
// balancer). periodsSince counts the status periods since the last read,
// this one included.
func NeedVersion(known, probeFailedSince, discoveryChanged bool, periodsSince int) bool {
	return !known || probeFailedSince || discoveryChanged || periodsSince >= versionEvery
}
