// Package shim exposes the Terraform random provider (v3.6.3) to the
// Pulumi Terraform bridge, which cannot import its internal package.
package shim

import (
	"github.com/hashicorp/terraform-plugin-framework/provider"

	randomprovider "github.com/terraform-providers/terraform-provider-random/internal/provider"
)

// NewProvider returns the plugin-framework provider of terraform-provider-random.
func NewProvider() provider.Provider {
	return randomprovider.New()
}
