//go:build tools

package tools

import _ "github.com/prometheus/node_exporter"
