//go:build tools

package tools

import _ "github.com/mattfenwick/cyclonus/cmd/cyclonus"
