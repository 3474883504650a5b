// Package dnsprobe checks in-cluster DNS the way a workload on the node sees
// it: one query for kubernetes.default.svc.<cluster-domain> to the node's
// resolver, classified into a verdict with a reason.
package dnsprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/pkg/health"
)

// Reasons of a DNS verdict.
const (
	ReasonResolved            = "ServiceDomainNameResolved"
	ReasonTimeout             = "ResolutionTimeout"
	ReasonResolverUnreachable = "ResolverUnreachable"
	ReasonNameNotFound        = "NameNotFound"
	ReasonServerFailure       = "ResolutionServerFailure"
	ReasonTruncated           = "TruncatedReply"
	ReasonMalformed           = "MalformedReply"
	ReasonNoAddress           = "NoAddressRecord"
	// ReasonResolutionFailed is the fallback for a failing verdict without a reason.
	ReasonResolutionFailed = "ServiceDomainNameResolutionFailed"
)

// ProbeName is the name probed in a cluster whose domain is clusterDomain.
func ProbeName(clusterDomain string) string {
	return dns.Fqdn("kubernetes.default.svc." + clusterDomain)
}

// Probe asks server (host:port) for name's A record, then AAAA if the cluster
// has no A record, each query bounded by timeout. Any failure is a False
// verdict whose reason says what went wrong; garbage from the server is a
// verdict, never a panic.
func Probe(ctx context.Context, server, name string, timeout time.Duration) health.Observation {
	obs, addrs := query(ctx, server, name, dns.TypeA, timeout)
	if obs.Status == metav1.ConditionFalse && obs.Reason == ReasonNoAddress {
		obs, addrs = query(ctx, server, name, dns.TypeAAAA, timeout)
	}
	if obs.Status == metav1.ConditionTrue {
		obs.Message = fmt.Sprintf("%s resolved to %v via %s", name, addrs, server)
	}
	return obs
}

func query(ctx context.Context, server, name string, qtype uint16, timeout time.Duration) (health.Observation, []string) {
	fail := func(reason, format string, args ...any) (health.Observation, []string) {
		return health.Observation{Status: metav1.ConditionFalse, Reason: reason,
			Message: fmt.Sprintf("%s %s via %s: ", name, dns.TypeToString[qtype], server) + fmt.Sprintf(format, args...)}, nil
	}
	msg := new(dns.Msg)
	msg.SetQuestion(name, qtype)
	client := &dns.Client{Net: "udp", Timeout: timeout}
	reply, _, err := client.ExchangeContext(ctx, msg, server)
	if err != nil {
		var netErr net.Error
		var opErr *net.OpError
		switch {
		case errors.As(err, &netErr) && netErr.Timeout(), errors.Is(err, context.DeadlineExceeded):
			return fail(ReasonTimeout, "no answer within %s", timeout)
		case errors.As(err, &opErr):
			return fail(ReasonResolverUnreachable, "%v", err)
		default:
			return fail(ReasonMalformed, "%v", err)
		}
	}
	if reply.Truncated {
		return fail(ReasonTruncated, "reply truncated")
	}
	switch reply.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return fail(ReasonNameNotFound, "NXDOMAIN")
	default:
		return fail(ReasonServerFailure, "rcode %s", dns.RcodeToString[reply.Rcode])
	}
	var addrs []string
	for _, rr := range reply.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			addrs = append(addrs, rr.A.String())
		case *dns.AAAA:
			addrs = append(addrs, rr.AAAA.String())
		}
	}
	if len(addrs) == 0 {
		return fail(ReasonNoAddress, "answer holds no %s record", dns.TypeToString[qtype])
	}
	return health.Observation{Status: metav1.ConditionTrue, Reason: ReasonResolved}, addrs
}
