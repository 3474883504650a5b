package cachetransform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// digestPrefix starts a cached Work manifest that stands for the stored one
// (see DigestManifests). It is not JSON, so a cached Work written back as
// it is fails at encoding instead of replacing the member's object.
const digestPrefix = "flotilla-manifest-digest:sha256:"

// DigestManifests replaces each manifest's bytes by a digest of its JSON
// value: a Work's manifests are a second copy of its template (one per
// target cluster), and the hub only needs to know whether they are what it
// would render (SameManifest).
func DigestManifests(manifests []workv1alpha1.Manifest) {
	for i := range manifests {
		m := &manifests[i]
		if m.Raw == nil || IsDigest(m.Raw) {
			continue
		}
		m.Raw, m.Object = ManifestDigest(m.Raw), nil
	}
}

// ManifestDigest is the digest DigestManifests puts in place of raw: a
// hash of its JSON value, so the same value stored with other bytes (key
// order, spacing, 1.0 for 1) has the same digest.
func ManifestDigest(raw []byte) []byte {
	sum := sha256.Sum256(canonicalJSON(raw))
	out := make([]byte, 0, len(digestPrefix)+2*len(sum))
	out = append(out, digestPrefix...)
	return hex.AppendEncode(out, sum[:])
}

// IsDigest reports whether raw is a digest rather than a manifest.
func IsDigest(raw []byte) bool { return bytes.HasPrefix(raw, []byte(digestPrefix)) }

// SameManifest reports whether two manifests, either of which may be a
// digest, have the same JSON value. Two manifests are compared as values.
func SameManifest(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	switch da, db := IsDigest(a), IsDigest(b); {
	case da && db:
		return false
	case da:
		return bytes.Equal(a, ManifestDigest(b))
	case db:
		return bytes.Equal(ManifestDigest(a), b)
	}
	return bytes.Equal(canonicalJSON(a), canonicalJSON(b))
}

// canonicalJSON re-encodes raw as the apiserver stores JSON: integers as
// integers (apimachinery's decoding), object keys sorted (encoding/json).
// Bytes that are not JSON are their own canonical form.
func canonicalJSON(raw []byte) []byte {
	var v any
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}
