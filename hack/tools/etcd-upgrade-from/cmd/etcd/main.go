// Command etcd is the etcd server of the version that upgrades start from.
// It is the main package of etcd v3.5's root module (go.etcd.io/etcd/v3),
// which the Go proxy does not serve at the pinned patch.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
