package app

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// termDiscovery is a member discovery client whose requests end with the
// leader's term. Discovery calls take no context, and client-go retries a
// GET that met a closed connection up to 10 times a second apart: a leader
// cut off from its member while a Work worker resolved a kind kept its
// hub-facing work running for 10 s and more after it had decided to step
// down. Here a request fails at once, and is not retried, when term is done.
func termDiscovery(term context.Context, memberCfg *rest.Config) (discovery.DiscoveryInterface, error) {
	cfg := rest.CopyConfig(memberCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &termTransport{term: term, next: rt} })
	return discovery.NewDiscoveryClientForConfig(rest.AddUserAgent(cfg, "work-discovery"))
}

type termTransport struct {
	term context.Context
	next http.RoundTripper
}

func (t *termTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.term.Err(); err != nil {
		return nil, fmt.Errorf("the agent's leader term is over: %w", err)
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.term, cancel)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() { stop(); cancel() }}
	return resp, nil
}

// releasingBody drops the request's link to the term when the body is
// closed, so a long term does not accumulate one per request.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
