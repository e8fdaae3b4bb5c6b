// The etcd server, built from the published go.etcd.io/etcd/server/v3 module
// (the etcd repository's own main module is not importable).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
