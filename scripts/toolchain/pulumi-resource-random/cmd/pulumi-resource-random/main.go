// The `random` resource provider plugin: Terraform random served through the bridge.
package main

import (
	"context"
	_ "embed"

	pftfbridge "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"

	"slurm-platform.local/toolchain/pulumi-resource-random/bridge"
)

// Written by pulumi-tfgen-random; a `{}` placeholder before the first generation.
//
//go:embed schema.json
var schema []byte

func main() {
	pftfbridge.Main(context.Background(), "random", bridge.Provider(), pftfbridge.ProviderMetadata{PackageSchema: schema})
}
