package pipeline

import (
	"context"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/refcache"
	"github.com/evalrun/evalrun/pipeline/stream"
)

// The reference cache (spec cache: or EVALRUN_CACHE; package refcache):
// a score chunk's reference rows are read from the cache when an entry for
// exactly this model, plugin, options and tokens exists, and written to it
// when the reference computed them.

// openCache opens the spec's cache directory; none with a kld_base
// reference or a reference model override (keyed by the run's model only).
func (r *runner) openCache() error {
	dir := r.plan.Spec.Cache
	if dir == "" || r.base != nil || r.plan.Spec.Reference.KLDBase != "" {
		return nil
	}
	if ref := r.plan.Spec.Backends()[0]; ref.Model != r.plan.Spec.Model.Path {
		r.log.Warn("reference cache not used: the reference loads its own model", "model", ref.Model)
		return nil
	}
	c, err := refcache.Open(dir)
	if err != nil {
		return &exitcode.InputError{Err: err}
	}
	r.cache = c
	return nil
}

// startRef starts a score chunk on the reference, or replays it from the
// cache; fill keeps the rows the reference computes, for the cache (nil:
// a hit).
func (r *runner) startRef(ctx context.Context, req backend.EvalRequest, rows, buffer int) (s *stream.Call, fill *cacheRows) {
	var key *refcache.Key
	if info := r.ref.info; r.cache != nil && info != nil {
		key = &refcache.Key{ModelSHA256: r.plan.Model.SHA256, Plugin: info.Name, PluginVersion: info.Version,
			Device: info.Device, Options: r.ref.Options, Tokens: req.Tokens, LogitsFrom: req.LogitsFrom, NVocab: r.plan.Model.NVocab}
		data, ok, err := r.cache.Get(*key, rows)
		if err != nil {
			r.log.Warn(err.Error())
		}
		if ok {
			return stream.Replay(data, rows, r.ref.streamConfig()), nil
		}
	}
	return r.ref.startEval(ctx, req, buffer), &cacheRows{key: key}
}

// cacheRows keeps a copy of the reference rows of a chunk being filled.
type cacheRows struct {
	key  *refcache.Key
	rows [][]float32
}

func (c *cacheRows) add(row []float32) {
	if c != nil && c.key != nil {
		c.rows = append(c.rows, append([]float32(nil), row...))
	}
}

// store writes a chunk the reference computed in full.
func (r *runner) store(c *cacheRows, want int) {
	if c == nil || c.key == nil || len(c.rows) != want || !r.ref.ok() {
		return
	}
	if err := r.cache.Put(*c.key, c.rows); err != nil {
		r.log.Warn("reference cache: entry not written", "error", err)
	}
}
