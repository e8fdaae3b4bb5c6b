// Generates the package schema (and bridge metadata) of the bridged random provider.
package main

import (
	pftfgen "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfgen"

	"slurm-platform.local/toolchain/pulumi-resource-random/bridge"
)

func main() {
	pftfgen.Main("random", bridge.Provider())
}
