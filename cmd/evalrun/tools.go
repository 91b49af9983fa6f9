package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/toolcmd"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// pluginTools are the commands evalrun runs in a plugin binary, with the
// arguments as given: the engine's commands in the cpu plugin (the host links
// no synth or generation code), the NPU tools in the rknn plugin (the host
// links no NPU code; a board needs that binary anyway).
var pluginTools = []struct{ plugin, name, short string }{
	{"cpu", "inspect", "Show a GGUF file's metadata, tensors (types and shapes) and parameter count"},
	{"cpu", "tokenize", "Print the token ids of a text as a JSON array"},
	{"cpu", "generate", "Generate text (greedy by default)"},
	{"cpu", "logits", "Write the logits of every position in llama.cpp's golden layout"},
	{"cpu", "synth", "Write a synthetic model with random weights and realistic shapes"},
	{"rknn", "kernels", "Write the llama.cpp RKNN backend's kernel list (mat_kernel_size.json) for a model"},
	{"rknn", "ops", "test-backend-ops for the NPU: check and time every kernel shape on random inputs"},
}

// newToolCmd runs evalrun-plugin-PLUGIN NAME ARGS..., the plugin looked up in
// $EVALRUN_PLUGIN_DIR, then beside evalrun; its exit code is evalrun's, and
// it ends with evalrun (toolcmd.Exec). evalrun help NAME shows the plugin's
// own help, as NAME --help does.
func newToolCmd(plugin, name, short string) *cobra.Command {
	bin := backend.PluginPrefix + plugin
	run := func(cmd *cobra.Command, args []string) error {
		path, err := backend.FindPlugin(plugin, os.Getenv("EVALRUN_PLUGIN_DIR")) // "" is skipped
		if err != nil {
			return backendErr(fmt.Errorf("%s is a command of %s: %w (make build builds it beside evalrun)", name, bin, err))
		}
		if err := backend.VerifyLocked(path); err != nil { // as a run checks it
			return backendErr(fmt.Errorf("%s: %w", name, err))
		}
		ctx := cmd.Context()
		if ctx == nil { // cobra's help command does not pass one on
			ctx = context.Background()
		}
		if name == "kernels" {
			if args, err = kernelsSpecArgs(ctx, args); err != nil {
				return err
			}
		}
		return toolcmd.Exec(ctx, path, append([]string{name}, args...), cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	cmd := &cobra.Command{
		Use:                name + " ...",
		Short:              short + " (" + bin + " " + name + "; --help for its flags)",
		DisableFlagParsing: true,
		RunE:               run,
	}
	cmd.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		if err := run(cmd, []string{"--help"}); err != nil {
			os.Exit(exitCode(err)) // cobra's help cannot fail: as NAME --help would
		}
	})
	return cmd
}

// kernelsSpecArgs does the host's part of evalrun kernels --spec SPEC: it
// reads and plans the spec here (the plugin links no host package) and hands
// the rknn plugin the model the run's rknn backend loads and the run's Eval
// calls as --model M --tokens T:O,...; other arguments pass unchanged.
func kernelsSpecArgs(ctx context.Context, args []string) ([]string, error) {
	var specPath string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "--help":
			return args, nil
		case a == "--spec" && i+1 < len(args):
			specPath = args[i+1]
			i++
		case strings.HasPrefix(a, "--spec="):
			specPath = strings.TrimPrefix(a, "--spec=")
		case a == "--model" || a == "-m" || a == "--tokens" || strings.HasPrefix(a, "--model=") || strings.HasPrefix(a, "--tokens="):
			if slices.Contains(args, "--spec") || slices.ContainsFunc(args, func(s string) bool { return strings.HasPrefix(s, "--spec=") }) {
				return nil, usageErr("--spec gives the model and the token counts: leave out --model and --tokens")
			}
			rest = append(rest, a)
		default:
			rest = append(rest, a)
		}
	}
	if specPath == "" {
		return args, nil
	}
	s, err := spec.Load(ctx, specPath)
	if err != nil {
		return nil, usageErr("--spec: %w", err)
	}
	p, err := plan.New(ctx, s)
	if err != nil {
		return nil, usageErr("--spec: %w", err)
	}
	model := s.Model.Path
	for _, b := range s.Backends() {
		if b.Plugin == "rknn" && b.Model != "" {
			model = b.Model
			break
		}
	}
	evals, err := p.Batches()
	if err != nil {
		return nil, usageErr("--spec: %w", err)
	}
	tokens := make([]string, len(evals))
	for i, e := range evals {
		tokens[i] = fmt.Sprintf("%d:%d", e.Tokens, e.Outputs)
	}
	return append(rest, "--model", model, "--tokens", strings.Join(tokens, ",")), nil
}
