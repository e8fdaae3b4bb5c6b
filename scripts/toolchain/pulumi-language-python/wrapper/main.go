// pulumi-language-python as the CLI starts it: the v3.79.0 host (installed beside this
// program as pulumi-language-python-v3.79.0), given the project's runtime options.
//
// The v3.79.0 host reads Pulumi.yaml's `runtime.options.virtualenv` only from its -virtualenv
// flag, and CLI v3.220.0 starts language hosts with the engine's address alone (newer hosts read
// the options from the RPC requests). Without the flag the host ran the program on the first
// python3 on PATH, so `pulumi up` outside the Makefile failed with "No module named 'pulumi'",
// and `pulumi new` made its virtualenv in the project's root instead of .venv.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"gopkg.in/yaml.v3"
)

const host = "pulumi-language-python-v3.79.0"

// projectFlags are the host flags for the project around the working directory (the CLI starts
// the host in the program's directory): its root, and its virtualenv where Pulumi.yaml names one.
// Pulumi.yaml is read as plain YAML: v3.79.0's project schema refuses keys newer CLIs accept
// (`template.displayName`), and the CLI has already loaded and checked the file.
func projectFlags() []string {
	cwd, err := os.Getwd()
	if err != nil {
		return nil
	}
	path, err := workspace.DetectProjectPathFrom(cwd)
	if err != nil || path == "" {
		return nil
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var project struct {
		Runtime any `yaml:"runtime"` // `python`, or {name: python, options: {...}}
	}
	if yaml.Unmarshal(text, &project) != nil {
		return nil
	}
	runtime, _ := project.Runtime.(map[string]any)
	options, _ := runtime["options"].(map[string]any)
	virtualenv, _ := options["virtualenv"].(string)
	if virtualenv == "" {
		return nil
	}
	return []string{"-root=" + filepath.Dir(path), "-virtualenv=" + virtualenv}
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	path := filepath.Join(filepath.Dir(self), host)
	args := append(append([]string{path}, projectFlags()...), os.Args[1:]...)
	err = syscall.Exec(path, args, os.Environ())
	fmt.Fprintf(os.Stderr, "pulumi-language-python: starting %s: %v\n", path, err)
	os.Exit(1)
}
