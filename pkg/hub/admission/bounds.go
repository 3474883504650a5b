package admission

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/lru"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// The webhook's port is reachable by any pod the network lets through, and
// the caller is not authenticated: everything a review makes the hub keep
// (a verdict in the cache, a metric series, a log line) or send back is
// bounded here, whatever the request says. A review through the apiserver
// is far inside these bounds (the CRD bounds every string of a spec).
const (
	// verdictCacheSize is how many verdicts (by spec content) the webhook
	// keeps: repeated reviews of one spec (kubectl apply again, a dry run,
	// the apiserver retrying) cost one compile. A flood of distinct specs
	// only evicts: each verdict is at most maxCauses+1 bounded errors,
	// (maxCauses+1)·(maxBadValue+maxDetail+maxFieldPath) ≈ 50 KiB, so the
	// cache holds at most ~6 MiB.
	verdictCacheSize = 128
	// maxCauses is how many field errors a refusal names; the rest are
	// counted in one more cause.
	maxCauses = 16
	// maxBadValue, maxDetail and maxFieldPath bound, in bytes, the value
	// an error quotes, its detail (a CEL error quotes the source line) and
	// its field path.
	maxBadValue  = 512
	maxDetail    = 2048
	maxFieldPath = 256
	// maxLogged bounds, in bytes, a string of the request the webhook logs
	// or quotes in a warning (a kind, a name).
	maxLogged = 256
	// maxMessage bounds, in bytes, a refusal's or an HTTP error's message.
	maxMessage = 16 << 10
	// maxUID bounds the review's uid, echoed in the answer (the apiserver
	// sends a UUID).
	maxUID = 128
	// maxConcurrentReviews is how many reviews the webhook reads and
	// decides at once; more wait, without their bodies read, until a slot
	// frees or the caller gives up. Compiling is CPU-bound: more would not
	// answer sooner, and each holds up to MaxRequestBytes.
	maxConcurrentReviews = 4
)

// MaxResponseBytes bounds the webhook's answer: a refusal's message and
// causes, each bounded, even if JSON escaped every byte of them (\u00xx,
// six bytes for one).
const MaxResponseBytes = 6 * (maxMessage + (maxCauses+1)*(maxMessage/8+maxFieldPath) + maxLogged + maxUID + 1024)

// verdicts are compile verdicts by content: the hash of a customization's
// spec, the whole of what Compile reads but its name.
type verdicts struct {
	cache *lru.Cache
}

func newVerdicts() *verdicts { return &verdicts{cache: lru.New(verdictCacheSize)} }

// specKey is the content hash of ric's spec as decoded (so formatting and
// unknown fields of the request do not matter).
func specKey(ric *configv1alpha1.ResourceInterpreterCustomization) ([sha256.Size]byte, error) {
	raw, err := json.Marshal(ric.Spec)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(raw), nil
}

// verdict is validate's bounded answer for ric, compiled at most once per
// content while it stays in the cache.
func (v *verdicts) verdict(ric *configv1alpha1.ResourceInterpreterCustomization, validate ValidateFunc) field.ErrorList {
	key, err := specKey(ric)
	if err != nil { // cannot happen for a decoded spec; do not cache
		return boundErrors(validate(ric))
	}
	if errs, ok := v.cache.Get(key); ok {
		return errs.(field.ErrorList)
	}
	errs := boundErrors(validate(ric))
	v.cache.Add(key, errs)
	return errs
}

// Len is how many verdicts are kept.
func (v *verdicts) Len() int { return v.cache.Len() }

// boundErrors bounds errs: at most maxCauses, each with its value, detail
// and field path cut, and one more error counting the rest.
func boundErrors(errs field.ErrorList) field.ErrorList {
	if len(errs) == 0 {
		return nil
	}
	out := make(field.ErrorList, 0, min(len(errs), maxCauses)+1)
	for _, e := range errs[:min(len(errs), maxCauses)] {
		b := *e
		b.Field = statuslimits.Truncate(e.Field, maxFieldPath)
		b.Detail = statuslimits.Truncate(e.Detail, maxDetail)
		b.BadValue = boundValue(e.BadValue)
		out = append(out, &b)
	}
	if rest := len(errs) - maxCauses; rest > 0 {
		out = append(out, field.Forbidden(field.NewPath("spec"), strconv.Itoa(rest)+" more errors not listed"))
	}
	return out
}

// boundValue is a field error's value, cut when it is a string or
// something printed as one.
func boundValue(v any) any {
	switch t := v.(type) {
	case nil, bool, int, int32, int64, float32, float64, field.OmitValueType:
		return v
	case string:
		return statuslimits.Truncate(t, maxBadValue)
	default:
		return statuslimits.Truncate(fmt.Sprint(t), maxBadValue)
	}
}

// boundStatus cuts a refusal's message and causes: they quote the
// object's name and the errors' values, which a caller writes.
func boundStatus(st *metav1.Status) {
	st.Message = statuslimits.Truncate(st.Message, maxMessage)
	if st.Details == nil {
		return
	}
	st.Details.Name = statuslimits.Truncate(st.Details.Name, maxLogged)
	for i := range st.Details.Causes {
		c := &st.Details.Causes[i]
		c.Message = statuslimits.Truncate(c.Message, maxMessage/8)
		c.Field = statuslimits.Truncate(c.Field, maxFieldPath)
	}
}
