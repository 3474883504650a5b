// Command coredns is CoreDNS with only the plugins Flotilla's environments
// use (hack/local-up.sh's Corefile: bind, errors, kubernetes, loadbalance,
// prometheus; test/externaldns's: etcd, which serves the SkyDNS records
// ExternalDNS's CoreDNS provider writes) and a few an edited Corefile
// commonly wants (log, health, ready, cache, forward, hosts, whoami). The
// upstream binary also compiles the cloud DNS providers' SDKs (route53,
// azure, clouddns) and the rest: most of its cold build time, none of it
// used here.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/etcd"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() {
	coremain.Run()
}
