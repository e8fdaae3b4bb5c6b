//go:build tools

// The Python language host of sdk/v3 v3.79.0, the last release that ships it
// inside the sdk/v3 module (later releases moved it to a module of its own).
package tools

import _ "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"
