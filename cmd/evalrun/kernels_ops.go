package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/rknnrt"
	"github.com/evalrun/evalrun/plugins/rknn/offload"
	"github.com/evalrun/evalrun/plugins/rknn/opscheck"
)

// parseBatchSizes reads --tokens "1,128": positive batch sizes.
func parseBatchSizes(s string) ([]int, error) {
	var ts []int
	for _, f := range strings.Split(s, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || t <= 0 {
			return nil, usageErr("--tokens: %q is not a positive token count (want e.g. 1,128)", f)
		}
		ts = append(ts, t)
	}
	return ts, nil
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
		return nil, usageErr("--ops: %v", err)
	}
	return ops, nil
}

func newKernelsCmd() *cobra.Command {
	var model, tokens, ops, out string
	cmd := &cobra.Command{
		Use:   "kernels --model M [--tokens 1[,128]] [--ops ffn_up,ffn_gate,...] [--out FILE]",
		Short: "Write the llama.cpp RKNN backend's kernel list (mat_kernel_size.json) for a model",
		Long: `kernels lists every weight matmul the model runs for the given batch sizes
(tokens per forward pass) as the llama.cpp RKNN backend's mat_kernel_size.json:
{"pairs":[{"src0":{"row":T,"col":K},"src1":{"row":K,"col":N},"name":"ffn_up-0"}]}.
--ops keeps only some matmuls (Qcur, Vcur, Kcur, attn_out, ffn_gate, ffn_up,
ffn_out, result_output). The list is the rknn plugin's "kernels" option.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ts, err := parseBatchSizes(tokens)
			if err != nil {
				return err
			}
			opList, err := parseOps(ops)
			if err != nil {
				return err
			}
			m, err := openModel(model, "exact", 1)
			if err != nil {
				return err
			}
			defer m.Close()
			l := kernels.ForModel(m, ts, opList)
			if out == "" || out == "-" {
				_, err = l.WriteTo(cmd.OutOrStdout())
				return err
			}
			if err := l.WriteFile(out); err != nil {
				return usageErr("--out: %v", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d kernels to %s\n", len(l.Pairs), out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&model, "model", "m", "", "GGUF model file")
	cmd.Flags().StringVar(&tokens, "tokens", "1", "comma-separated batch sizes (tokens per forward pass)")
	cmd.Flags().StringVar(&ops, "ops", "", "comma-separated ops to keep (default all)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (default stdout)")
	return cmd
}

func newOpsCmd() *cobra.Command {
	var kernelsPath, model, tokens, ops, driver, typ, acLayout, dumpDir string
	var cores int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "ops (--kernels FILE | --model M [--tokens 1]) --driver sim|hardware [--type fp16|int8|int4] [--cores 3] [--dump DIR]",
		Short: "test-backend-ops for the NPU: check and time every kernel shape on random inputs",
		Long: `ops runs every kernel of a list (or of a model, see 'evalrun kernels') through
the rknn plugin's offload path on random inputs uniform in [-1, 1] and compares
the result with a float64 reference of the unquantized inputs:
NMSE = Σ(npu−ref)²/Σnpu² must be ≤ 5e-4 (test-backend-ops' MUL_MAT threshold)
and no output may be NaN or Inf. GFLOPS = 2·M·K·N / NPU run time (on the
simulator this measures the simulation, not an RK3588).
--dump DIR writes, per op, the A, B and C buffers exactly as laid out for the
NPU, the inputs in normal layout, the reference and a JSON sidecar.
Exit status 1 when any op fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := opscheck.Config{Model: model, DumpDir: dumpDir, Seed: seed, Cores: cores}
			switch {
			case kernelsPath != "" && model != "":
				return usageErr("give --kernels or --model, not both")
			case kernelsPath != "":
				l, err := kernels.Load(kernelsPath)
				if err != nil {
					return usageErr("--kernels: %v", err)
				}
				cfg.Kernels = &l
			case model != "":
				ts, err := parseBatchSizes(tokens)
				if err != nil {
					return err
				}
				if cfg.Ops, err = parseOps(ops); err != nil {
					return err
				}
				cfg.Tokens = ts
			default:
				return usageErr("--kernels or --model is required")
			}
			var err error
			if cfg.Type, err = offload.ParseType(typ); err != nil {
				return usageErr("--type: %v", err)
			}
			if cores < 1 || cores > npu.MaxCores {
				return usageErr("--cores: %d outside 1..%d", cores, npu.MaxCores)
			}
			switch acLayout {
			case "native":
				cfg.ACLayout = npu.LayoutNative
			case "normal", "norm":
				cfg.ACLayout = npu.LayoutNorm
			default:
				return usageErr("--ac-layout: %q unknown (want native or normal)", acLayout)
			}
			switch driver {
			case "sim":
				cfg.DriverName = "sim"
			case "hardware":
				d, err := rknnrt.New()
				if err != nil {
					return backendErr(fmt.Errorf("--driver hardware: %w", err))
				}
				cfg.Driver, cfg.DriverName = d, "hardware"
			default:
				return usageErr("--driver: %q unknown (want sim or hardware)", driver)
			}
			rep, err := opscheck.Run(cmd.Context(), cfg, cmd.OutOrStdout())
			if err != nil {
				return usageErr("%v", err)
			}
			if !rep.OK {
				return &exitError{exitGateFailed, fmt.Errorf("%d of %d ops failed", len(rep.Results)-rep.Passed, len(rep.Results))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kernelsPath, "kernels", "", "kernel list (mat_kernel_size.json) to check")
	f.StringVarP(&model, "model", "m", "", "GGUF model whose matmul shapes to check")
	f.StringVar(&tokens, "tokens", "1", "with --model: comma-separated batch sizes")
	f.StringVar(&ops, "ops", "", "with --model: comma-separated ops to keep (default all)")
	f.StringVar(&driver, "driver", "sim", "NPU driver: sim or hardware (needs a -tags rknpu build)")
	f.StringVar(&typ, "type", "fp16", "NPU type: fp16, int8 or int4")
	f.IntVar(&cores, "cores", npu.MaxCores, "NPU cores sharing each matmul's N (1..3)")
	f.StringVar(&acLayout, "ac-layout", "native", "layout of A and C: native or normal")
	f.StringVar(&dumpDir, "dump", "", "write every op's NPU buffers and a JSON sidecar under DIR")
	f.Uint64Var(&seed, "seed", 1, "random seed of the inputs")
	return cmd
}
