// Package spec reads an evalrun experiment spec: a YAML file naming the model,
// the prompt sets, the reference backend, the candidate backends and the gates
// that decide the verdict. docs/spec.md documents the
// keys, defaults, paths and EVALRUN_ overrides; configs/*.yaml are examples.
//
// Load walks the YAML (yaml.v3 nodes) against the Spec struct before
// decoding it, so that every problem is reported with its file, line and key
// path, all at once (an ErrorList): unknown keys with a did-you-mean, wrong
// types (yaml.v3 alone would turn 2.5 into 2, "yes" into true, 12 into "12"),
// duplicate keys, invalid YAML; then the per-key rules in the struct tags
// (validate.go) and the rules between keys. Environment overrides are
// checked like the file's values and named in errors; an EVALRUN_ variable
// that names no key is refused. Spec.Err points a later error (the model's,
// a plugin's) at a key's line.
package spec
