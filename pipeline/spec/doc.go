// Package spec reads an evalrun experiment spec: a YAML file naming the model,
// the prompt sets, the reference backend, the candidate backends and the gates
// that decide the verdict. configs/*.yaml are commented examples.
//
// # Strictness
//
// Load walks the YAML (yaml.v3 nodes) against the Spec struct before
// decoding it, so every problem is reported with its line: an unknown or
// mis-cased key (`configs/x.yaml:12: unknown key "backends[0].thread" (did
// you mean "threads"?)`; keys are lower-case), a wrong type (`threads: 2.5`,
// `name: 12`, `enabled: yes`), a duplicate key, invalid YAML, and then
// missing required fields, bad enum values, duplicate dataset or backend
// names, out-of-range numbers (threads beyond 4 × the CPUs, n_ctx < 8,
// sizes beyond 2^24 tokens). All problems are returned together as an
// ErrorList. Timeouts are duration strings ("30s", "2m"); a bare number is
// an error. Gates accept integers and decimals. Plugin options are
// free-form: their keys keep their case, and the plugin validates them
// (Spec.Err points an error of the plugin at the option's line). A spec is
// at most MaxSize bytes; Load reads FIFOs too and stops when its context
// ends.
//
// # Plugins
//
// plugin: NAME runs the binary evalrun-plugin-NAME from plugin_dir (or the
// CLI's --plugin-dir) or beside evalrun; a value with a path separator is
// refused. To run any other executable the spec says so: plugin_path: PATH.
//
// # Defaults
//
// reference.name "reference"; threads 0 or absent = the number of CPUs;
// datasets[].mode score, n_ctx 128 (score), max_new_tokens 32 (generate);
// bench enabled, n_prompt 64, n_gen 16, reps 5, warmup true;
// output.formats [json, jsonl, md, junit]; timeouts start 30s, load 120s, eval 300s,
// bench 600s. Gates are unchecked unless set; a set gate is checked even at 0.
// A key with no value ("gates:") counts as absent.
//
// # Paths
//
// Every relative path in the spec, including output.dir, starts at the
// directory of the spec file, not at the working directory: model.path,
// datasets[].path, reference.kld_base, the backends' model, plugin_path and
// output.kld_base, plugin_dir and output.dir. A path from an environment
// variable is treated the same way. When output.dir is absent the default is
// ./results of the working directory. After Load every path is absolute.
// Load checks that the input files exist; pass WithoutFileChecks to skip
// that.
//
// # Environment overrides
//
// An environment variable EVALRUN_<KEY> overrides a scalar key, whether or
// not the file has it (viper's AutomaticEnv reads them): the key path upper-
// cased, with '_' for '.' and around list indices: EVALRUN_BENCH_REPS,
// EVALRUN_OUTPUT_DIR, EVALRUN_TIMEOUTS_EVAL, EVALRUN_GATES_KLD_MEAN_MAX,
// EVALRUN_REFERENCE_THREADS, EVALRUN_BACKENDS_0_THREADS,
// EVALRUN_BACKENDS_1_GATES_NMSE_MAX, EVALRUN_DATASETS_0_LIMIT. The value is
// read as a YAML scalar of the key's type (a string key takes it verbatim;
// output.formats is a comma-separated list) and checked like a value of the
// file; an error names the variable. An empty variable counts as unset.
// Items of the datasets and backends lists can be changed only if the file
// has them; a variable for an item the file lacks is an error. Plugin
// options cannot be set from the environment.
//
// # Backends
//
// Spec.Candidates holds the backends list as written; Spec.Backends returns
// the backends to launch, reference first (unless it is a KLD base file),
// with the effective model, thread count and gates filled in. The reference
// is a Backend too (Reference embeds it), without gates.
package spec
