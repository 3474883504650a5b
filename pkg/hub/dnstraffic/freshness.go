package dnstraffic

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"k8s.io/utils/clock"
)

// freshness says how current the served view is. The MCI informer keeps its
// last view when the host apiserver goes away and says nothing about it, so
// a check (a quorum read through the same client and permission as the
// informer) runs every interval: while it fails, the view is stale, for as
// long as it has failed since its last success. Up to the horizon the
// server keeps answering from that view, saying so (RFC 8914 Stale Answer),
// because the clusters it names were healthy when last seen and no answer
// at all is a certain outage; past the horizon it answers SERVFAIL, so
// resolvers turn to another name server (another hub).
type freshness struct {
	check    func(context.Context) error
	interval time.Duration
	horizon  time.Duration
	clock    clock.Clock
	metrics  *Metrics

	// lastOK is when the last check that succeeded began (UnixNano); 0
	// before any. failing is set while the latest check failed.
	lastOK  atomic.Int64
	failing atomic.Bool
}

// viewState is how current the served view is at one moment.
type viewState struct {
	// Stale: the latest check failed; Age is the time since the last one
	// that succeeded (or since the server started, before any).
	Stale bool
	Age   time.Duration
	// Expired: stale for longer than the horizon; the server stops
	// answering from the view.
	Expired bool
}

// state is the view's state now. Without a check the view is always
// current (the tests that drive a Table directly, and callers that opt out).
func (f *freshness) state() viewState {
	if f == nil || f.check == nil || !f.failing.Load() {
		return viewState{}
	}
	age := f.clock.Now().Sub(time.Unix(0, f.lastOK.Load()))
	return viewState{Stale: true, Age: age, Expired: age > f.horizon}
}

// run checks every interval until ctx is done, logging each change between
// current and stale.
func (f *freshness) run(ctx context.Context, log func(stale bool, err error, age time.Duration)) {
	if f.check == nil {
		return
	}
	f.lastOK.Store(f.clock.Now().UnixNano()) // the age counts from start before any success
	for {
		f.once(ctx, log)
		select {
		case <-ctx.Done():
			return
		case <-f.clock.After(f.interval):
		}
	}
}

func (f *freshness) once(ctx context.Context, log func(stale bool, err error, age time.Duration)) {
	start := f.clock.Now()
	cctx, cancel := context.WithTimeout(ctx, f.interval)
	err := f.check(cctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		f.lastOK.Store(start.UnixNano())
		if f.failing.Swap(false) {
			log(false, nil, 0)
		}
		f.metrics.ViewStaleSeconds.Set(0)
		return
	}
	age := f.clock.Now().Sub(time.Unix(0, f.lastOK.Load()))
	if !f.failing.Swap(true) {
		log(true, err, age)
	}
	f.metrics.ViewStaleSeconds.Set(age.Seconds())
}

// markStale makes resp say how current its data is: a stale view's answers
// carry RFC 8914 Extended DNS Error 3 (Stale Answer) where the client speaks
// EDNS; an expired view's are replaced by SERVFAIL with EDE 0 (Other) saying
// why. Only replies that come from the view change: a malformed query's
// FORMERR, NOTIMP or BADVERS stays what it is.
func markStale(resp *dns.Msg, st viewState) {
	if !st.Stale {
		return
	}
	switch resp.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeRefused:
	default:
		return
	}
	ede := &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeStaleAnswer,
		ExtraText: fmt.Sprintf("flotilla hub: host apiserver unanswered for %s", st.Age.Truncate(time.Second))}
	if st.Expired {
		resp.Rcode = dns.RcodeServerFailure
		resp.Answer, resp.Ns = nil, nil
		resp.Authoritative = false
		ede.InfoCode = dns.ExtendedErrorCodeOther
		ede.ExtraText = fmt.Sprintf("flotilla hub: view older than its stale horizon (%s unanswered)", st.Age.Truncate(time.Second))
	}
	if opt := resp.IsEdns0(); opt != nil {
		opt.Option = append(opt.Option, ede)
	}
}
