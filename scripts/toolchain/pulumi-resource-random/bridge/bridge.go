// Package bridge maps the Terraform random provider onto Pulumi's `random`
// package: the tokens the pulumi-random SDKs use (random:index/<name>:<Name>).
package bridge

import (
	_ "embed"

	pftfbridge "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge/tokens"

	"github.com/terraform-providers/terraform-provider-random/shim"
)

// Version is stamped at build time (-ldflags -X) with the pulumi-random SDK
// version it serves plus, as semver build metadata, the Terraform provider it
// was bridged from, e.g. 4.21.4+tfrandom.3.6.3.
var Version = "0.0.0-dev"

// Written by pulumi-tfgen-random; a `{}` placeholder before the first generation.
//
//go:embed bridge-metadata.json
var metadata []byte

// Provider describes the bridged provider for tfgen and for the plugin.
func Provider() tfbridge.ProviderInfo {
	info := tfbridge.ProviderInfo{
		P:                 pftfbridge.ShimProvider(shim.NewProvider()),
		Name:              "random",
		DisplayName:       "random",
		Version:           Version,
		TFProviderVersion: "3.6.3",
		MetadataInfo:      tfbridge.NewProviderMetadata(metadata),
	}
	// The whole Terraform name, prefix included, as pulumi-random does:
	// random_password -> random:index/randomPassword:RandomPassword.
	info.MustComputeTokens(tokens.SingleModule("", "index", tokens.MakeStandard("random")))
	return info
}
