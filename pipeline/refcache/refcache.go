// Package refcache keeps reference logits between runs: a content-addressed
// directory of entries keyed by everything that decides them (the model's
// sha256, the token ids fed, the reference plugin's name, version, device
// and options, and the rows asked for). A later run, or another shard,
// reads them instead of having the reference compute them again.
//
// An entry is one file, DIR/ab/abcdef… (its key), written atomically
// (package atomicfile: concurrent writers of one key each rename a complete
// file into place, and readers never see a partial one), holding the rows
// as float32 and a SHA-256 of everything before it. A truncated or corrupt
// entry fails its checksum: it is removed, reported, and recomputed.
package refcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/userfile"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// Key is what decides a reference's logits rows.
type Key struct {
	ModelSHA256   string         `json:"model_sha256"`
	Plugin        string         `json:"plugin"` // Describe's name
	PluginVersion string         `json:"plugin_version"`
	Device        string         `json:"device"`
	Options       map[string]any `json:"options,omitempty"`
	Tokens        []int32        `json:"tokens"`
	LogitsFrom    int            `json:"logits_from"`
	NVocab        int            `json:"n_vocab"`
}

// ID is the key's content address (hex SHA-256 of its canonical JSON; map
// keys are sorted by encoding/json).
func (k Key) ID() string {
	data, _ := json.Marshal(k)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Stats counts a run's use of the cache: summary.CacheStats.
type Stats = summary.CacheStats

// Cache is a cache directory.
type Cache struct {
	Dir   string
	Stats Stats
}

// Open makes the directory if needed.
func Open(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("reference cache: %w", err)
	}
	return &Cache{Dir: dir}, nil
}

const magic = "EVRC1\n"

func (c *Cache) path(id string) string { return filepath.Join(c.Dir, id[:2], id) }

// Get reads the entry of key: rows rows of nVocab logits, one slice.
// ok is false on a miss; a damaged entry is removed and reported in err
// (a warning: the caller recomputes) with ok false.
func (c *Cache) Get(key Key, rows int) (data []float32, ok bool, err error) {
	path := c.path(key.ID())
	raw, err := userfile.ReadFile(path, int64(rows)*int64(key.NVocab)*4+1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		c.Stats.Misses++
		return nil, false, nil
	}
	if err == nil {
		data, err = decode(raw, rows, key.NVocab)
	}
	if err != nil {
		c.Stats.Misses++
		c.Stats.Corrupt++
		os.Remove(path)
		return nil, false, fmt.Errorf("reference cache entry %s: %v: removed, the reference computes it again", path, err)
	}
	now := time.Now()
	os.Chtimes(path, now, now) // the age prune goes by: last use
	c.Stats.Hits++
	return data, true, nil
}

func decode(raw []byte, rows, nVocab int) ([]float32, error) {
	n := rows * nVocab
	if want := len(magic) + 8 + 4*n + sha256.Size; len(raw) != want {
		return nil, fmt.Errorf("%d bytes, want %d (truncated?)", len(raw), want)
	}
	body := raw[:len(raw)-sha256.Size]
	if sum := sha256.Sum256(body); string(sum[:]) != string(raw[len(body):]) {
		return nil, errors.New("checksum mismatch")
	}
	if string(body[:len(magic)]) != magic {
		return nil, errors.New("not a cache entry")
	}
	h := body[len(magic):]
	if int(binary.LittleEndian.Uint32(h)) != rows || int(binary.LittleEndian.Uint32(h[4:])) != nVocab {
		return nil, errors.New("shape differs from the key's")
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(h[8+4*i:]))
	}
	return out, nil
}

// Put writes the entry of key atomically.
func (c *Cache) Put(key Key, rows [][]float32) error {
	id := key.ID()
	if err := os.MkdirAll(filepath.Join(c.Dir, id[:2]), 0o777); err != nil {
		return err
	}
	b := make([]byte, 0, len(magic)+8+4*len(rows)*key.NVocab+sha256.Size)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rows)))
	b = binary.LittleEndian.AppendUint32(b, uint32(key.NVocab))
	for _, r := range rows {
		if len(r) != key.NVocab {
			return fmt.Errorf("reference cache: a row of %d logits, the key says %d", len(r), key.NVocab)
		}
		for _, v := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	sum := sha256.Sum256(b)
	if err := atomicfile.WriteFile(c.path(id), append(b, sum[:]...)); err != nil {
		return err
	}
	c.Stats.Written++
	return nil
}

// Entry is one cache file.
type Entry struct {
	Path    string
	Size    int64
	ModTime time.Time // last written or read
}

// List lists the entries, least recently used first.
func List(dir string) ([]Entry, error) {
	var out []Entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") || len(d.Name()) != 2*sha256.Size {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, Entry{Path: path, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	slices.SortFunc(out, func(a, b Entry) int { return a.ModTime.Compare(b.ModTime) })
	return out, err
}

// Prune removes entries unused for longer than maxAge (0: no limit), then
// the least recently used until the rest fit in maxBytes (0: no limit).
func Prune(dir string, maxAge time.Duration, maxBytes int64, now time.Time) (removed []Entry, err error) {
	entries, err := List(dir)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range entries {
		total += e.Size
	}
	for _, e := range entries {
		if !(maxAge > 0 && now.Sub(e.ModTime) > maxAge) && !(maxBytes > 0 && total > maxBytes) {
			continue
		}
		if err := os.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		total -= e.Size
		removed = append(removed, e)
	}
	return removed, nil
}
