// pulumi-resource-random: a small stand-in for the `random` provider.
//
// The real provider (pulumi/pulumi-random, bridged from
// hashicorp/terraform-provider-random) is not served by the Go module proxy
// reachable from our machines, so this project carries its own provider for
// the resources the pulumi-random Python SDK (4.21.x) exposes and the program
// uses. Wire names and semantics follow terraform-provider-random:
//
//   - random:index/randomBytes:RandomBytes       length, keepers -> base64, hex
//   - random:index/randomPassword:RandomPassword length, upper/lower/numeric/special,
//     min*, overrideSpecial, keepers -> result, bcryptHash
//   - random:index/randomString:RandomString     same inputs -> result
//
// Every input forces replacement (as upstream); Read returns the stored state.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"sort"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// Set with -ldflags "-X main.version=...".
var version = "0.0.0-dev"

const (
	tokBytes    = "random:index/randomBytes:RandomBytes"
	tokPassword = "random:index/randomPassword:RandomPassword"
	tokString   = "random:index/randomString:RandomString"

	defaultSpecial = "!@#$%&*()-_=+[]{}<>:?"
)

func main() {
	err := provider.Main("random", func(*provider.HostClient) (pulumirpc.ResourceProviderServer, error) {
		return &randomProvider{}, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type randomProvider struct {
	pulumirpc.UnimplementedResourceProviderServer
}

var marshalOpts = plugin.MarshalOptions{KeepUnknowns: true, KeepSecrets: true, SkipNulls: true}

func unmarshal(s *structpb.Struct) (resource.PropertyMap, error) {
	return plugin.UnmarshalProperties(s, marshalOpts)
}

func marshal(m resource.PropertyMap) (*structpb.Struct, error) {
	return plugin.MarshalProperties(m, marshalOpts)
}

func typeOf(urn string) string {
	return string(resource.URN(urn).Type())
}

// inputKeys lists, per resource type, the inputs and their defaults (nil: no default).
var inputKeys = map[string]map[string]resource.PropertyValue{
	tokBytes: {
		"length":  {},
		"keepers": {},
	},
	tokPassword: passwordInputs(),
	tokString:   passwordInputs(),
}

func passwordInputs() map[string]resource.PropertyValue {
	return map[string]resource.PropertyValue{
		"length":          {},
		"keepers":         {},
		"overrideSpecial": {},
		"upper":           resource.NewBoolProperty(true),
		"lower":           resource.NewBoolProperty(true),
		"numeric":         resource.NewBoolProperty(true),
		"number":          resource.NewBoolProperty(true),
		"special":         resource.NewBoolProperty(true),
		"minUpper":        resource.NewNumberProperty(0),
		"minLower":        resource.NewNumberProperty(0),
		"minNumeric":      resource.NewNumberProperty(0),
		"minSpecial":      resource.NewNumberProperty(0),
	}
}

func (p *randomProvider) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (p *randomProvider) GetSchema(context.Context, *pulumirpc.GetSchemaRequest) (*pulumirpc.GetSchemaResponse, error) {
	return &pulumirpc.GetSchemaResponse{
		Schema: fmt.Sprintf(`{"name":"random","version":%q}`, version),
	}, nil
}

func (p *randomProvider) Handshake(
	context.Context, *pulumirpc.ProviderHandshakeRequest,
) (*pulumirpc.ProviderHandshakeResponse, error) {
	return &pulumirpc.ProviderHandshakeResponse{AcceptSecrets: true, AcceptResources: true}, nil
}

func (p *randomProvider) CheckConfig(
	_ context.Context, req *pulumirpc.CheckRequest,
) (*pulumirpc.CheckResponse, error) {
	return &pulumirpc.CheckResponse{Inputs: req.GetNews()}, nil
}

func (p *randomProvider) DiffConfig(context.Context, *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
}

func (p *randomProvider) Configure(
	context.Context, *pulumirpc.ConfigureRequest,
) (*pulumirpc.ConfigureResponse, error) {
	return &pulumirpc.ConfigureResponse{AcceptSecrets: true, SupportsPreview: true}, nil
}

func (p *randomProvider) Check(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	ty := typeOf(req.GetUrn())
	keys, ok := inputKeys[ty]
	if !ok {
		return nil, fmt.Errorf("unsupported resource type %q (this project's random provider only has %s, %s, %s)",
			ty, tokBytes, tokPassword, tokString)
	}
	news, err := unmarshal(req.GetNews())
	if err != nil {
		return nil, err
	}
	out := resource.PropertyMap{}
	var failures []*pulumirpc.CheckFailure
	for k, v := range news {
		if _, known := keys[string(k)]; known {
			out[k] = v
		} else if !strings.HasPrefix(string(k), "__") {
			failures = append(failures, &pulumirpc.CheckFailure{
				Property: string(k), Reason: fmt.Sprintf("unknown property %q", k),
			})
		} else {
			out[k] = v
		}
	}
	for k, def := range keys {
		if _, has := out[resource.PropertyKey(k)]; !has && !def.IsNull() {
			out[resource.PropertyKey(k)] = def
		}
	}
	length, has := out["length"]
	switch {
	case !has:
		failures = append(failures, &pulumirpc.CheckFailure{Property: "length", Reason: "missing required property 'length'"})
	case length.IsNumber() && length.NumberValue() < 1:
		failures = append(failures, &pulumirpc.CheckFailure{Property: "length", Reason: "length must be at least 1"})
	}
	inputs, err := marshal(out)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CheckResponse{Inputs: inputs, Failures: failures}, nil
}

// Diff: every input forces replacement (as in terraform-provider-random).
func (p *randomProvider) Diff(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	olds, err := unmarshal(req.GetOldInputs())
	if err != nil {
		return nil, err
	}
	if len(olds) == 0 { // state written without inputs: compare against outputs
		if olds, err = unmarshal(req.GetOlds()); err != nil {
			return nil, err
		}
	}
	news, err := unmarshal(req.GetNews())
	if err != nil {
		return nil, err
	}
	keys := inputKeys[typeOf(req.GetUrn())]
	var replaces []string
	for k := range keys {
		pk := resource.PropertyKey(k)
		o, n := olds[pk], news[pk]
		if n.ContainsUnknowns() || !o.DeepEquals(n) {
			if o.IsNull() && n.IsNull() {
				continue
			}
			replaces = append(replaces, k)
		}
	}
	sort.Strings(replaces)
	if len(replaces) == 0 {
		return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
	}
	detailed := map[string]*pulumirpc.PropertyDiff{}
	for _, k := range replaces {
		detailed[k] = &pulumirpc.PropertyDiff{Kind: pulumirpc.PropertyDiff_UPDATE_REPLACE, InputDiff: true}
	}
	return &pulumirpc.DiffResponse{
		Changes:         pulumirpc.DiffResponse_DIFF_SOME,
		Replaces:        replaces,
		Diffs:           replaces,
		DetailedDiff:    detailed,
		HasDetailedDiff: true,
	}, nil
}

func (p *randomProvider) Create(_ context.Context, req *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	ty := typeOf(req.GetUrn())
	ins, err := unmarshal(req.GetProperties())
	if err != nil {
		return nil, err
	}
	outs := ins.Copy()
	computed := []resource.PropertyKey{"base64", "hex"}
	if ty != tokBytes {
		computed = []resource.PropertyKey{"result"}
		if ty == tokPassword {
			computed = append(computed, "bcryptHash")
		}
	}
	if req.GetPreview() || ins.ContainsUnknowns() {
		for _, k := range computed {
			outs[k] = resource.MakeComputed(resource.NewStringProperty(""))
		}
		props, err := marshal(outs)
		if err != nil {
			return nil, err
		}
		return &pulumirpc.CreateResponse{Properties: props}, nil
	}

	length := int(plain(ins["length"]).NumberValue())
	switch ty {
	case tokBytes:
		buf := make([]byte, length)
		if _, err := rand.Read(buf); err != nil {
			return nil, err
		}
		outs["base64"] = resource.MakeSecret(resource.NewStringProperty(base64.StdEncoding.EncodeToString(buf)))
		outs["hex"] = resource.MakeSecret(resource.NewStringProperty(hex.EncodeToString(buf)))
	default:
		result, err := randomString(ins, length)
		if err != nil {
			return nil, err
		}
		if ty == tokPassword {
			hash, err := bcrypt.GenerateFromPassword([]byte(result), bcrypt.DefaultCost)
			if err != nil {
				return nil, err
			}
			outs["result"] = resource.MakeSecret(resource.NewStringProperty(result))
			outs["bcryptHash"] = resource.MakeSecret(resource.NewStringProperty(string(hash)))
		} else {
			outs["result"] = resource.NewStringProperty(result)
		}
	}
	props, err := marshal(outs)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CreateResponse{Id: "none", Properties: props}, nil
}

func plain(v resource.PropertyValue) resource.PropertyValue {
	for v.IsSecret() {
		v = v.SecretValue().Element
	}
	return v
}

func boolIn(m resource.PropertyMap, k string) bool {
	v := plain(m[resource.PropertyKey(k)])
	return v.IsBool() && v.BoolValue()
}

func intIn(m resource.PropertyMap, k string) int {
	v := plain(m[resource.PropertyKey(k)])
	if v.IsNumber() {
		return int(v.NumberValue())
	}
	return 0
}

func pick(charset string) (byte, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(int64(len(charset))))
	if err != nil {
		return 0, err
	}
	return charset[n.Int64()], nil
}

// randomString follows terraform-provider-random: the min* counts first, then
// the rest from the union of enabled sets, then a shuffle.
func randomString(m resource.PropertyMap, length int) (string, error) {
	const (
		upper   = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		lower   = "abcdefghijklmnopqrstuvwxyz"
		numbers = "0123456789"
	)
	special := defaultSpecial
	if v := plain(m["overrideSpecial"]); v.IsString() && v.StringValue() != "" {
		special = v.StringValue()
	}
	numeric := boolIn(m, "numeric") && boolIn(m, "number")
	sets := []struct {
		on    bool
		chars string
		min   int
	}{
		{boolIn(m, "upper"), upper, intIn(m, "minUpper")},
		{boolIn(m, "lower"), lower, intIn(m, "minLower")},
		{numeric, numbers, intIn(m, "minNumeric")},
		{boolIn(m, "special"), special, intIn(m, "minSpecial")},
	}
	var all string
	var out []byte
	for _, s := range sets {
		if !s.on {
			continue
		}
		all += s.chars
		for i := 0; i < s.min; i++ {
			c, err := pick(s.chars)
			if err != nil {
				return "", err
			}
			out = append(out, c)
		}
	}
	if all == "" {
		return "", fmt.Errorf("at least one of upper, lower, numeric or special must be true")
	}
	for len(out) < length {
		c, err := pick(all)
		if err != nil {
			return "", err
		}
		out = append(out, c)
	}
	for i := len(out) - 1; i > 0; i-- {
		j, err := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		if err != nil {
			return "", err
		}
		out[i], out[j.Int64()] = out[j.Int64()], out[i]
	}
	return string(out), nil
}

func (p *randomProvider) Read(_ context.Context, req *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	return &pulumirpc.ReadResponse{Id: req.GetId(), Properties: req.GetProperties(), Inputs: req.GetInputs()}, nil
}

func (p *randomProvider) Update(context.Context, *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	return nil, fmt.Errorf("random resources are replaced, never updated")
}

func (p *randomProvider) Delete(context.Context, *pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

func (p *randomProvider) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}
