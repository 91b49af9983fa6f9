// Package runcompare compares two evalrun runs: per backend, every accuracy
// statistic with its delta and whether the change is beyond the statistics'
// own uncertainty, throughput with a significance verdict from the
// per-repetition samples (package speedstat), status changes, and, from the
// exact digests (package digest), whether the logits are bit-identical or
// where they first changed. It also evaluates a run's relative gates
// against a baseline run.
package runcompare
