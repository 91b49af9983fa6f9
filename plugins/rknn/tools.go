package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/toolcmd"
	"github.com/evalrun/evalrun/plugins/enginebackend"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/opscheck"
)

// The plugin's commands, run as "evalrun-plugin-rknn kernels|ops ..." (by
// evalrun kernels and evalrun ops, which pass their arguments on).
func tools() []*cobra.Command { return []*cobra.Command{newKernelsCmd(), newOpsCmd()} }

// parseBatchSizes reads ops' --tokens "1,128": positive batch sizes.
func parseBatchSizes(s string) ([]int, error) {
	var ts []int
	for _, f := range strings.Split(s, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || t <= 0 {
			return nil, toolcmd.UsageErr("--tokens: %q is not a positive token count (want e.g. 1,128)", f)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// parseEvals reads --tokens "1,128" or "127:64,1": Eval calls of T tokens,
// the last O of them with logits (all T without :O).
func parseEvals(s string) ([]kernels.Batch, error) {
	var out []kernels.Batch
	for _, f := range strings.Split(s, ",") {
		ts, os, hasOutputs := strings.Cut(strings.TrimSpace(f), ":")
		t, err := strconv.Atoi(ts)
		o := t
		if err == nil && hasOutputs {
			o, err = strconv.Atoi(os)
		}
		if err != nil || t <= 0 || o <= 0 || o > t {
			return nil, toolcmd.UsageErr("--tokens: %q is not a token count T or T:O with 0 < O <= T logit rows (want e.g. 1,128 or 127:64)", f)
		}
		out = append(out, kernels.Batch{Tokens: t, Outputs: o})
	}
	return out, nil
}

// parseOps reads --ops "ffn_up,ffn_gate": base names of weight matmuls.
func parseOps(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ops []string
	for _, f := range strings.Split(s, ",") {
		ops = append(ops, strings.TrimSpace(f))
	}
	if err := kernels.CheckOps(ops); err != nil {
		return nil, toolcmd.UsageErr("--ops: %v", err)
	}
	return ops, nil
}

func newKernelsCmd() *cobra.Command {
	var model, tokens, ops, out, specPath string
	cmd := &cobra.Command{
		Use:   "kernels (--spec SPEC | --model M [--tokens 1[,128|,T:O]]) [--ops ffn_up,ffn_gate,...] [--out FILE]",
		Short: "Write the llama.cpp RKNN backend's kernel list (mat_kernel_size.json) for a model",
		Long: `kernels lists every weight matmul the model runs for the given batch sizes
(tokens per forward pass) as the llama.cpp RKNN backend's mat_kernel_size.json:
{"pairs":[{"src0":{"row":T,"col":K},"src1":{"row":K,"col":N},"name":"ffn_up-0"}]}.
--spec SPEC derives the model and the forward passes from an experiment spec
instead, so that the list names exactly the shapes its run executes: a score
chunk of n_ctx evaluates n_ctx-1 tokens with logits from n_ctx/2 (the last
layer's FFN and the output head run on those rows only), a generate prompt
is prefilled with logits for its last token and continued one token at a
time, and the bench runs its prompt in chunks of 512 and single tokens.
(evalrun kernels reads the spec and hands this command the model and those
Eval calls as --model and --tokens.)
--tokens T lists Eval calls of T tokens that all have logits, T:O calls
whose last O tokens have logits; a call longer than 512 tokens is decoded
in passes of 512, as the plugin does.
--ops keeps only some matmuls (wqkv, Qcur, Vcur, Kcur, attn_out, ffn_gate,
ffn_up, ffn_out, result_output; wqkv is a fused Q/K/V, and a fused FFN's
ffn_up computes gate and up rows). The list is the rknn plugin's "kernels"
option.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opList, err := parseOps(ops)
			if err != nil {
				return err
			}
			switch {
			case specPath != "":
				return toolcmd.UsageErr("--spec is read by evalrun kernels, which plans the spec's run and passes --model and --tokens on: run evalrun kernels --spec %s", specPath)
			case model == "":
				return toolcmd.UsageErr("give --spec or --model")
			}
			evals, err := parseEvals(tokens)
			if err != nil {
				return err
			}
			batches := kernels.Passes(evals, enginebackend.EvalBatch)
			m, err := engine.Open(model, engine.Options{Threads: 1})
			if err != nil {
				return toolcmd.UsageErr("%v", err)
			}
			defer m.Close()
			l := kernels.ForBatches(m, batches, opList)
			if out == "" || out == "-" {
				_, err = l.WriteTo(cmd.OutOrStdout())
				return err
			}
			if err := l.WriteFile(out); err != nil {
				return toolcmd.UsageErr("--out: %v", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d kernels to %s\n", len(l.Pairs), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&specPath, "spec", "", "experiment spec whose run the list is for (model and token counts)")
	cmd.Flags().StringVarP(&model, "model", "m", "", "GGUF model file")
	cmd.Flags().StringVar(&tokens, "tokens", "1", "comma-separated Eval calls: T tokens, or T:O with logits for the last O")
	cmd.Flags().StringVar(&ops, "ops", "", "comma-separated ops to keep (default all)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (default stdout)")
	return cmd
}

func newOpsCmd() *cobra.Command {
	var o options
	var cores int
	var model, tokens, ops, dumpDir string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "ops (--kernels FILE | --model M [--tokens 1]) --driver sim|hardware [--type fp16|int8|int4] [--cores 3] [--dump DIR]",
		Short: "test-backend-ops for the NPU: check and time every kernel shape on random inputs",
		Long: `ops runs every kernel of a list (or of a model, see 'evalrun kernels') through
the rknn plugin's offload path on random inputs uniform in [-1, 1] and compares
the result with a float64 reference of the unquantized inputs:
NMSE = Σ(npu−ref)²/Σnpu² must be ≤ 5e-4 for fp16 and int8 (test-backend-ops'
MUL_MAT threshold) and ≤ 4e-2 for int4 (4× the noise of quantizing both inputs
to ±7 steps, about 1e-2), and no output may be NaN or Inf. GFLOPS = 2·M·K·N / NPU run time (on the
simulator this measures the simulation, not an RK3588).
--driver, --type, --cores, --ac-layout and --kernels are the plugin's options.
--dump DIR writes, per op, the A, B and C buffers exactly as laid out for the
NPU, the inputs in normal layout, the reference and a JSON sidecar.
Exit status 1 when any op fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (o.Kernels == "") == (model == "") {
				return toolcmd.UsageErr("give exactly one of --kernels and --model")
			}
			o.Cores = &cores
			if err := o.Validate(); err != nil {
				return toolcmd.UsageErr("%v", err)
			}
			cfg := opscheck.Config{Kernels: o.cfg.Kernels, Model: model, DumpDir: dumpDir, Seed: seed,
				DriverName: o.Driver, Type: o.cfg.Type, Cores: o.cfg.Cores, ACLayout: o.cfg.ACLayout}
			if model != "" {
				var err error
				if cfg.Tokens, err = parseBatchSizes(tokens); err != nil {
					return err
				}
				if cfg.Ops, err = parseOps(ops); err != nil {
					return err
				}
			}
			drv, err := o.openDriver(1, nil, nil)
			if err != nil {
				return toolcmd.BackendErr(err)
			}
			cfg.Driver = drv
			rep, err := opscheck.Run(cmd.Context(), cfg, cmd.OutOrStdout())
			if err != nil {
				return toolcmd.UsageErr("%w", err)
			}
			if !rep.OK {
				return &toolcmd.Error{Code: exitcode.GateFailed, Err: fmt.Errorf("%d of %d ops failed", len(rep.Results)-rep.Passed, len(rep.Results))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kernels, "kernels", "", "kernel list (mat_kernel_size.json) to check")
	f.StringVarP(&model, "model", "m", "", "GGUF model whose matmul shapes to check")
	f.StringVar(&tokens, "tokens", "1", "with --model: comma-separated batch sizes")
	f.StringVar(&ops, "ops", "", "with --model: comma-separated ops to keep (default all)")
	f.StringVar(&o.Driver, "driver", "sim", "NPU driver: sim or hardware (needs a -tags rknpu build)")
	f.StringVar(&o.Type, "type", "fp16", "NPU type: fp16, int8 or int4")
	f.IntVar(&cores, "cores", 3, "NPU cores sharing each matmul's N (1..3)")
	f.StringVar(&o.ACLayout, "ac-layout", "native", "layout of A and C: native or normal")
	f.StringVar(&dumpDir, "dump", "", "write every op's NPU buffers and a JSON sidecar under DIR")
	f.Uint64Var(&seed, "seed", 1, "random seed of the inputs")
	return cmd
}
