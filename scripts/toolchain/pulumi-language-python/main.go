// pulumi-language-python: a small Python language host for the Pulumi engine.
//
// Upstream's host (pulumi/pulumi sdk/python/cmd/pulumi-language-python) is a
// nested, untagged Go module that the Go module proxy reachable from our
// machines does not serve, so this project carries its own host. It does what
// `pulumi preview/up` and `--policy-pack` need:
//
//   - Run: runs the program through `pulumi-language-python-exec` (the shim
//     shipped in the pulumi/pulumi sdk/v3 module, installed next to this
//     binary) with the interpreter of the project's virtualenv;
//   - RunPlugin: runs a Python policy pack (PulumiPolicy.yaml, runtime python),
//     streaming its output back to the engine;
//   - InstallDependencies, About, GetProgramDependencies: via the sdk's
//     python/toolchain package (pip / uv / poetry).
//
// GetRequiredPackages reports nothing: plugins are resolved when the program
// registers resources (the toolchain installs them on PATH).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/logging"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
)

// Set with -ldflags "-X main.version=...".
var version = "0.0.0-dev"

// Exit code with which pulumi-language-python-exec says it already showed the
// user an actionable error: the engine should bail without another message.
const userActionableExitCode = 32

func main() {
	var tracing, engineAddress string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--tracing" || a == "-tracing":
			if i+1 < len(args) {
				tracing = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "-v="), strings.HasPrefix(a, "--v="):
			if v, err := strconv.Atoi(a[strings.Index(a, "=")+1:]); err == nil {
				logging.InitLogging(true, v, true)
			}
		case strings.HasPrefix(a, "-"):
			// --logtostderr, -root=..., and options we do not use.
		default:
			engineAddress = a
		}
	}

	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	execShim := filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
	if _, err := os.Stat(execShim); err != nil {
		fatal(fmt.Errorf("the Python exec shim must sit next to the language host: %w", err))
	}

	host := &languageHost{exec: execShim, engineAddress: engineAddress, tracing: tracing}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
	})
	if err != nil {
		fatal(fmt.Errorf("could not start language host RPC server: %w", err))
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fatal(fmt.Errorf("language host RPC stopped serving: %w", err))
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
	os.Exit(1)
}

type languageHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	exec          string
	engineAddress string
	tracing       string

	mu      sync.Mutex
	running map[*exec.Cmd]struct{}
}

// options reads the `runtime.options` of Pulumi.yaml / PulumiPolicy.yaml.
func options(info *pulumirpc.ProgramInfo, forPlugin bool) (toolchain.PythonOptions, error) {
	opts := toolchain.PythonOptions{Toolchain: toolchain.Pip}
	if info == nil {
		return opts, errors.New("missing program info")
	}
	opts.Root = info.GetRootDirectory()
	opts.ProgramDir = info.GetProgramDirectory()
	raw := map[string]any{}
	if info.GetOptions() != nil {
		raw = info.GetOptions().AsMap()
	}
	if v, ok := raw["virtualenv"]; ok {
		s, ok := v.(string)
		if !ok {
			return opts, errors.New("virtualenv option must be a string")
		}
		opts.Virtualenv = s
	}
	if v, ok := raw["toolchain"]; ok {
		switch v {
		case "pip":
			opts.Toolchain = toolchain.Pip
		case "uv":
			opts.Toolchain = toolchain.Uv
		case "poetry":
			opts.Toolchain = toolchain.Poetry
		default:
			return opts, fmt.Errorf("unsupported toolchain option: %v", v)
		}
	}
	if v, ok := raw["typechecker"]; ok && v != "" && v != nil {
		logging.V(3).Infof("ignoring typechecker option %v", v)
	}
	// Like upstream: plugins (policy packs) never run in the ambient Python.
	if forPlugin && opts.Toolchain == toolchain.Pip && opts.Virtualenv == "" {
		opts.Virtualenv = "venv"
	}
	return opts, nil
}

func (h *languageHost) Handshake(
	ctx context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *languageHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *languageHost) GetRequiredPlugins(
	context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *languageHost) GetRequiredPackages(
	context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *languageHost) track(cmd *exec.Cmd, add bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running == nil {
		h.running = map[*exec.Cmd]struct{}{}
	}
	if add {
		h.running[cmd] = struct{}{}
	} else {
		delete(h.running, cmd)
	}
}

func (h *languageHost) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for cmd := range h.running {
		if cmd.Process != nil {
			_ = cmd.Process.Signal(os.Interrupt)
		}
	}
	return &emptypb.Empty{}, nil
}

func (h *languageHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	if info == nil {
		info = &pulumirpc.ProgramInfo{
			RootDirectory:    req.GetPwd(),
			ProgramDirectory: req.GetPwd(),
			EntryPoint:       req.GetProgram(), //nolint:staticcheck // old engines
		}
	}
	opts, err := options(info, false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}

	args := []string{h.exec}
	add := func(k, v string) {
		if v != "" {
			args = append(args, "--"+k, v)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engineAddress)
	add("project", req.GetProject())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", strconv.FormatBool(req.GetDryRun()))
	add("parallel", strconv.Itoa(int(req.GetParallel())))
	add("tracing", h.tracing)
	add("organization", req.GetOrganization())
	add("root_directory", info.GetRootDirectory())
	program := info.GetEntryPoint()
	if program == "" {
		program = "."
	}
	if info.GetProgramDirectory() != "" && !filepath.IsAbs(program) {
		program = filepath.Join(info.GetProgramDirectory(), program)
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	config := req.GetConfig()
	if config == nil {
		config = map[string]string{}
	}
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("serializing config: %w", err)
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	keys, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, fmt.Errorf("serializing config secret keys: %w", err)
	}

	// `python -u` like upstream: output must reach the engine unbuffered.
	cmd, err := tc.Command(ctx, append([]string{"-u"}, args...)...)
	if err != nil {
		return nil, err
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env,
		"PULUMI_CONFIG="+string(cfg),
		"PULUMI_CONFIG_SECRET_KEYS="+string(keys),
		"PYTHONUNBUFFERED=1",
	)
	if req.GetPwd() != "" {
		cmd.Dir = req.GetPwd()
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	logging.V(5).Infof("language host launching: %v", cmd.Args)

	h.track(cmd, true)
	err = cmd.Run()
	h.track(cmd, false)
	if err == nil {
		return &pulumirpc.RunResponse{}, nil
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if status, ok := exitErr.Sys().(syscall.WaitStatus); ok {
			if status.ExitStatus() == userActionableExitCode {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{
				Error: fmt.Sprintf("Program exited with non-zero exit code: %d", status.ExitStatus()),
			}, nil
		}
		return &pulumirpc.RunResponse{Error: "Program exited unexpectedly: " + exitErr.Error()}, nil
	}
	return &pulumirpc.RunResponse{
		Error: "Problem executing program (could not run language executor): " + err.Error(),
	}, nil
}

// RunPlugin runs a Python policy pack: `python <pack dir> <engine address>`;
// the pack's __main__.py (pulumi_policy.PolicyPack) prints the port it serves on.
func (h *languageHost) RunPlugin(
	req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer,
) error {
	opts, err := options(req.GetInfo(), true)
	if err != nil {
		return err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	if err := tc.ValidateVenv(server.Context()); err != nil {
		return err
	}
	args := append([]string{"-u", req.GetInfo().GetProgramDirectory()}, req.GetArgs()...)
	cmd, err := tc.Command(server.Context(), args...)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()

	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, req.GetEnv()...)
	cmd.Env = append(cmd.Env, "PYTHONUNBUFFERED=1")
	cmd.Dir = req.GetPwd()
	cmd.Stdout, cmd.Stderr = stdout, stderr

	h.track(cmd, true)
	err = cmd.Run()
	h.track(cmd, false)
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if status, ok := exitErr.Sys().(syscall.WaitStatus); ok {
				return server.Send(&pulumirpc.RunPluginResponse{
					Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(status.ExitStatus())},
				})
			}
		}
		return fmt.Errorf("running plugin: %w", err)
	}
	return closer.Close()
}

func (h *languageHost) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	opts, err := options(req.GetInfo(), req.GetIsPlugin())
	if err != nil {
		return err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeInstallDependenciesStreams(server, req.GetIsTerminal())
	if err != nil {
		return err
	}
	defer closer.Close()
	dir := req.GetInfo().GetProgramDirectory()
	if err := tc.EnsureVenv(server.Context(), dir, req.GetUseLanguageVersionTools(), true, stdout, stderr); err != nil {
		return err
	}
	if err := tc.InstallDependencies(
		server.Context(), dir, req.GetUseLanguageVersionTools(), true, stdout, stderr); err != nil {
		return err
	}
	return closer.Close()
}

func (h *languageHost) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	opts, err := options(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	about, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: about.PythonExecutable,
		Version:    about.PythonVersion.String(),
		Metadata:   map[string]string{"toolchain": toolchain.Name(opts.Toolchain)},
	}, nil
}

func (h *languageHost) GetProgramDependencies(
	ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	opts, err := options(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	pkgs, err := tc.ListPackages(ctx, req.GetTransitiveDependencies())
	if err != nil {
		return nil, err
	}
	deps := make([]*pulumirpc.DependencyInfo, 0, len(pkgs))
	for _, p := range pkgs {
		deps = append(deps, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return &pulumirpc.GetProgramDependenciesResponse{Dependencies: deps}, nil
}

func (h *languageHost) RuntimeOptionsPrompts(
	context.Context, *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}
