// Command coredns is CoreDNS with only the plugins that the local cluster's
// Corefile (hack/cluster/addons/coredns.yaml) names. CoreDNS's own main
// links every plugin, the cloud providers' DNS SDKs among them, and was the
// slowest tool to build after Kubernetes; a Corefile that names a plugin
// left out here fails at start with "unknown directive".
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
