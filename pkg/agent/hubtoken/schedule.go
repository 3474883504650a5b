package hubtoken

import "time"

const (
	// MinLifetime is the shortest lifetime TokenRequest grants.
	MinLifetime = 10 * time.Minute
	// DefaultRenewFraction renews at 80% of the lifetime, as the kubelet
	// does for projected ServiceAccount tokens.
	DefaultRenewFraction = 0.8

	retryInitial = time.Second
	retryMax     = 5 * time.Minute
)

// RenewAt is when t should be replaced: fraction of its lifetime after it
// was issued. A token whose issue time is unknown is treated as issued at
// seen (when the agent first read it).
func RenewAt(t Token, fraction float64, seen time.Time) time.Time {
	issued := t.IssuedAt
	if issued.IsZero() {
		issued = seen
	}
	return issued.Add(time.Duration(float64(t.Expiry.Sub(issued)) * fraction))
}

// RetryDelay is the wait after the failures-th failed renewal in a row
// while remaining validity is left: doubling from 1s up to 5m, but never
// more than a quarter of what remains, so several attempts still fit before
// the token expires (a 24h token renewed at 80% gets hundreds; a 10m one
// about eight). Past expiry it retries every 5m (a sibling's persisted or an
// admin's new token may still appear).
func RetryDelay(failures int, remaining time.Duration) time.Duration {
	d := retryMax
	if failures < 20 { // 2^19 s is far past the cap
		d = min(retryInitial<<max(failures-1, 0), retryMax)
	}
	if remaining > 0 {
		d = min(d, remaining/4)
	}
	return max(d, retryInitial)
}

// ExpiringSoon reports whether t, not yet renewed, has used up half of the
// time between its renewal point and its expiry (90% of its lifetime at the
// default fraction: 2.4h before a 24h token expires). Time enough for an
// operator to act on the HubTokenExpiringSoon warning.
func ExpiringSoon(t Token, fraction float64, seen, now time.Time) bool {
	renewAt := RenewAt(t, fraction, seen)
	return !now.Before(renewAt.Add(t.Expiry.Sub(renewAt) / 2))
}

// RequestedLifetime is the expirationSeconds to request for t's successor:
// the configured one, else t's own lifetime (the one the admin chose), never
// less than TokenRequest's minimum.
func RequestedLifetime(t Token, configured time.Duration, seen time.Time) time.Duration {
	d := configured
	if d <= 0 {
		issued := t.IssuedAt
		if issued.IsZero() {
			issued = seen
		}
		d = t.Expiry.Sub(issued).Round(time.Second)
	}
	return max(d, MinLifetime)
}
