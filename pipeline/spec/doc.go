// Package spec reads an evalrun experiment spec: a YAML file naming the model,
// the prompt sets, the reference backend, the candidate backends and the gates
// that decide the verdict. configs/*.yaml are commented examples.
//
// # Strictness
//
// Load reads the file with viper and decodes it with weak typing off, after
// checking the YAML itself against the schema, so every problem is reported
// with its line: an unknown or mis-cased key (`configs/x.yaml:12: unknown key
// "backends[0].thread" (did you mean "threads"?)`; keys are lower-case), a
// wrong type (`threads: 2.5`, `name: 12`, `enabled: yes`), a duplicate key,
// invalid YAML, and then missing required fields, bad enum values, duplicate
// dataset or backend names, negative numbers and n_ctx < 8. All problems are
// returned together as an ErrorList. Timeouts are duration strings ("30s",
// "2m"); a bare number is an error. Gates accept integers and decimals.
// Plugin options are free-form: their keys keep their case and may contain
// dots (viper would lower-case and split them), and the plugin validates them.
//
// # Defaults
//
// reference.name "reference"; threads 0 or absent = the number of CPUs;
// datasets[].mode score, n_ctx 128 (score), max_new_tokens 32 (generate);
// bench enabled, n_prompt 64, n_gen 16, reps 5, warmup true;
// output.formats [json, jsonl, md]; timeouts start 30s, load 120s, eval 300s,
// bench 600s. Gates are unchecked unless set; a set gate is checked even at 0.
//
// # Paths
//
// Every relative path in the spec, including output.dir, starts at the
// directory of the spec file, not at the working directory: model.path,
// datasets[].path, reference.model, reference.kld_base,
// reference.output.kld_base, backends[].model, backends[].output.kld_base,
// plugin_dir, output.dir, and a plugin given as a path (containing '/'). A
// path from an environment variable is treated the same way. When output.dir
// is absent the default is ./results of the working directory. After Load
// every path is absolute. Load checks that the input files exist (the model,
// model overrides, datasets, KLD base, plugin paths, plugin_dir); pass
// WithoutFileChecks to skip that.
//
// # Environment overrides
//
// An environment variable EVALRUN_<KEY> overrides a scalar key, whether or
// not the file has it; the key path is upper-cased with '_' for '.' and for a
// list index. Values are parsed per field type (integers, numbers, true/false
// as strconv.ParseBool, durations such as "45s"; output.formats is a
// comma-separated list) and a bad value is an error naming the variable. An
// empty variable counts as unset, as in viper.
//
//	EVALRUN_NAME                         name
//	EVALRUN_MODEL_PATH                   model.path
//	EVALRUN_MODEL_SHA256                 model.sha256
//	EVALRUN_REFERENCE_NAME               reference.name
//	EVALRUN_REFERENCE_PLUGIN             reference.plugin
//	EVALRUN_REFERENCE_THREADS            reference.threads
//	EVALRUN_REFERENCE_MODEL              reference.model
//	EVALRUN_REFERENCE_KLD_BASE           reference.kld_base
//	EVALRUN_REFERENCE_OUTPUT_KLD_BASE    reference.output.kld_base
//	EVALRUN_BENCH_ENABLED                bench.enabled
//	EVALRUN_BENCH_N_PROMPT               bench.n_prompt
//	EVALRUN_BENCH_N_GEN                  bench.n_gen
//	EVALRUN_BENCH_REPS                   bench.reps
//	EVALRUN_BENCH_WARMUP                 bench.warmup
//	EVALRUN_GATES_KLD_MEAN_MAX           gates.kld_mean_max
//	EVALRUN_GATES_KLD_P99_MAX            gates.kld_p99_max
//	EVALRUN_GATES_SAME_TOP_P_MIN         gates.same_top_p_min
//	EVALRUN_GATES_NMSE_MAX               gates.nmse_max
//	EVALRUN_GATES_GREEDY_MATCH_MIN       gates.greedy_match_min
//	EVALRUN_GATES_MAX_ABS_DIFF_MAX       gates.max_abs_diff_max
//	EVALRUN_GATES_PPL_RATIO_MAX          gates.ppl_ratio_max
//	EVALRUN_GATES_TG_TS_MIN              gates.tg_ts_min
//	EVALRUN_GATES_PP_TS_MIN              gates.pp_ts_min
//	EVALRUN_OUTPUT_DIR                   output.dir
//	EVALRUN_OUTPUT_FORMATS               output.formats
//	EVALRUN_PLUGIN_DIR                   plugin_dir
//	EVALRUN_TIMEOUTS_START               timeouts.start
//	EVALRUN_TIMEOUTS_LOAD                timeouts.load
//	EVALRUN_TIMEOUTS_EVAL                timeouts.eval
//	EVALRUN_TIMEOUTS_BENCH               timeouts.bench
//
// Items of the datasets and backends lists that the file has can be changed
// by index: EVALRUN_DATASETS_<i>_{NAME,PATH,MODE,N_CTX,MAX_NEW_TOKENS,LIMIT}
// and EVALRUN_BACKENDS_<i>_{NAME,PLUGIN,THREADS,MODEL,OUTPUT_KLD_BASE,
// GATES_<GATE>}; a variable for an item the file lacks is an error. Plugin
// options cannot be set from the environment.
//
// # Backends
//
// Spec.Candidates holds the backends list as written; Spec.Backends returns
// the backends to launch, reference first (unless it is a KLD base file),
// with the effective model, thread count and gates filled in.
package spec
