package execution

import "golang.org/x/time/rate"

// newBucket is the overall retry budget across Works: 10/s, burst 100.
func newBucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(10), 100) }
