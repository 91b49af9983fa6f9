// Package llama binds a llama.cpp shared library (libllama and its ggml
// libraries) without cgo, through github.com/ebitengine/purego. Structs that
// the C API passes by value are mirrored per llama.cpp version (layout.go);
// Open probes the library's defaults and refuses a layout it does not know.
//
// A process holds at most one library: llama.cpp and ggml keep global state
// (backend registry, logging), and two builds loaded side by side would
// resolve each other's symbols.
package llama

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"os/signal"

	"github.com/ebitengine/purego"
)

// Device is a ggml backend device the library registered.
type Device struct {
	Name        string // e.g. "CPU"
	Description string // e.g. the CPU model
	Type        string // cpu, gpu, igpu, accel, meta
	Backend     string // the registering backend, e.g. "CPU", "RKNN"
}

// Library is a loaded llama.cpp build.
type Library struct {
	Dir        string
	Layout     *Layout
	Version    string // llama.cpp version from the library's file name ("v0.5.0"), or "unknown"
	Commit     string // llama_commit() when libllama-common is beside it, else ggml_commit()
	GGML       string // ggml_version() and ggml_commit()
	CPUVariant string // the CPU backend library that was loaded ("zen4"), "built-in", or "none"
	Devices    []Device
	SystemInfo string // llama_print_system_info()

	f funcs
}

// funcs are the bound C functions. Those taking or returning a mirrored
// struct are reflect values of the layout's function types.
type funcs struct {
	modelLoad   reflect.Value // llama_model * (const char *, llama_model_params)
	initContext reflect.Value // llama_context * (llama_model *, llama_context_params)
	batchInit   reflect.Value // llama_batch (int32_t n_tokens, int32_t embd, int32_t n_seq_max)
	batchFree   reflect.Value // void (llama_batch)
	decode      reflect.Value // int32_t (llama_context *, llama_batch)

	modelDefaults   func() probeBuf
	contextDefaults func() probeBuf

	modelFree      func(uintptr)
	free           func(uintptr)
	getMemory      func(uintptr) uintptr
	memorySeqRm    func(mem uintptr, seq, p0, p1 int32) bool
	memoryClear    func(mem uintptr, data bool)
	memorySeqPosMx func(mem uintptr, seq int32) int32
	stateSeqSize   func(ctx uintptr, seq int32) uintptr
	stateSeqGet    func(ctx uintptr, dst *byte, size uintptr, seq int32) uintptr
	stateSeqSet    func(ctx uintptr, src *byte, size uintptr, seq int32) uintptr
	logitsIth      func(ctx uintptr, i int32) *float32
	synchronize    func(ctx uintptr)
	nCtx           func(ctx uintptr) uint32
	getVocab       func(model uintptr) uintptr
	vocabNTokens   func(vocab uintptr) int32
	vocabText      func(vocab uintptr, tok int32) string
	nParams        func(model uintptr) uint64
	modelSize      func(model uintptr) uint64
	nCtxTrain      func(model uintptr) int32
	nEmbd          func(model uintptr) int32
	nLayer         func(model uintptr) int32
	modelDesc      func(model uintptr, buf *byte, size uintptr) int32
	metaValStr     func(model uintptr, key string, buf *byte, size uintptr) int32
	devByName      func(name string) uintptr
	vocabBOS       func(vocab uintptr) int32
	vocabAddBOS    func(vocab uintptr) bool
}

var (
	loadMu sync.Mutex
	loaded *Library
	// loadedKey, loadedDir and loadedVariant are what the first Open was
	// called with; loadedErr is why it failed.
	loadedKey, loadedDir, loadedVariant string
	loadedErr                           error
)

// DLFlags are the dlopen flags: resolve everything now (a missing symbol
// fails here, not mid-run) and make ggml's symbols global for the backend
// libraries ggml loads itself.
const DLFlags = purego.RTLD_NOW | purego.RTLD_GLOBAL

// Open loads the llama.cpp build in dir, or returns the one already loaded
// when dir and cpuVariant are the same. cpuVariant "" lets ggml pick the best
// CPU backend library for this CPU (ggml_backend_load_all_from_path); a name
// such as "haswell" loads only libggml-cpu-haswell.so (with every non-CPU
// backend in dir).
func Open(dir, cpuVariant string) (*Library, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	// Say what is wrong with dir itself before anything else.
	if st, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("lib_dir: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("lib_dir %s is not a directory", abs)
	}
	if _, err := findLib(abs, "libllama", llamaPatterns...); err != nil {
		return nil, err
	}
	key := abs + "\x00" + cpuVariant
	switch {
	case loadedKey != "" && key != loadedKey:
		// A refused library stays mapped too (C++ libraries rarely unload),
		// and its global symbols would bind another build's references.
		return nil, fmt.Errorf("llama.cpp from %s (cpu_variant %q) was already opened in this plugin process; one process loads one build", loadedDir, loadedVariant)
	case loadedKey != "":
		return loaded, loadedErr
	}
	lib, err := open(abs, cpuVariant)
	loadedKey, loadedDir, loadedVariant = key, abs, cpuVariant
	if err != nil {
		loadedErr = err
		return nil, err
	}
	loaded = lib
	return lib, nil
}

// Loaded returns the library this process loaded, or nil.
func Loaded() *Library {
	loadMu.Lock()
	defer loadMu.Unlock()
	return loaded
}

// findLib returns the one file in dir matching any of the patterns.
func findLib(dir, what string, patterns ...string) (string, error) {
	var found []string
	for _, p := range patterns {
		m, _ := filepath.Glob(filepath.Join(dir, p))
		for _, f := range m {
			if !slices.Contains(found, f) && !strings.Contains(filepath.Base(f), "-common") {
				found = append(found, f)
			}
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no %s in %s (looked for %s)", what, dir, strings.Join(patterns, ", "))
	case 1:
		return found[0], nil
	}
	// libllama.so, libllama.so.0 and libllama.so.0.0.1 are usually symlinks
	// to one file: take the shortest name.
	slices.SortFunc(found, func(a, b string) int { return len(a) - len(b) })
	return found[0], nil
}

// llamaPatterns are libllama's file names: upstream builds, the npm package.
var llamaPatterns = []string{"libllama.so", "libllama.so.*", "libllama.v*.so"}

var versionInName = regexp.MustCompile(`\.(v\d+\.\d+\.\d+)\.so`)

func open(dir, cpuVariant string) (*Library, error) {
	quietAbort()
	llamaPath, err := findLib(dir, "libllama", llamaPatterns...)
	if err != nil {
		return nil, err
	}
	// RUNPATH $ORIGIN in libllama finds libggml and libggml-base beside it.
	h, err := purego.Dlopen(llamaPath, DLFlags)
	if err != nil {
		return nil, fmt.Errorf("dlopen %s: %w", llamaPath, err)
	}
	setLogFilter(h)
	lib := &Library{Dir: dir, Version: "unknown", CPUVariant: "none"}
	if m := versionInName.FindStringSubmatch(filepath.Base(llamaPath)); m != nil {
		lib.Version = m[1]
	}

	var missing []string
	bind := func(fptr any, name string) {
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			missing = append(missing, name)
			return
		}
		purego.RegisterFunc(fptr, sym)
	}
	var (
		backendInit     func()
		loadAllFromPath func(string)
		devCount        func() uintptr
		devGet          func(uintptr) uintptr
		devName         func(uintptr) string
		devDescription  func(uintptr) string
		devType         func(uintptr) int32
		devReg          func(uintptr) uintptr
		regName         func(uintptr) string
		systemInfo      func() string
	)
	f := &lib.f
	bind(&f.modelDefaults, "llama_model_default_params")
	bind(&f.contextDefaults, "llama_context_default_params")
	bind(&backendInit, "llama_backend_init")
	bind(&loadAllFromPath, "ggml_backend_load_all_from_path")
	bind(&devCount, "ggml_backend_dev_count")
	bind(&devGet, "ggml_backend_dev_get")
	bind(&devName, "ggml_backend_dev_name")
	bind(&devDescription, "ggml_backend_dev_description")
	bind(&devType, "ggml_backend_dev_type")
	bind(&devReg, "ggml_backend_dev_backend_reg")
	bind(&regName, "ggml_backend_reg_name")
	bind(&systemInfo, "llama_print_system_info")
	bind(&f.modelFree, "llama_model_free")
	bind(&f.free, "llama_free")
	bind(&f.getMemory, "llama_get_memory")
	bind(&f.memorySeqRm, "llama_memory_seq_rm")
	bind(&f.memoryClear, "llama_memory_clear")
	bind(&f.memorySeqPosMx, "llama_memory_seq_pos_max")
	bind(&f.stateSeqSize, "llama_state_seq_get_size")
	bind(&f.stateSeqGet, "llama_state_seq_get_data")
	bind(&f.stateSeqSet, "llama_state_seq_set_data")
	bind(&f.logitsIth, "llama_get_logits_ith")
	bind(&f.synchronize, "llama_synchronize")
	bind(&f.nCtx, "llama_n_ctx")
	bind(&f.getVocab, "llama_model_get_vocab")
	bind(&f.vocabNTokens, "llama_vocab_n_tokens")
	bind(&f.vocabText, "llama_vocab_get_text")
	bind(&f.nParams, "llama_model_n_params")
	bind(&f.modelSize, "llama_model_size")
	bind(&f.nCtxTrain, "llama_model_n_ctx_train")
	bind(&f.nEmbd, "llama_model_n_embd")
	bind(&f.nLayer, "llama_model_n_layer")
	bind(&f.modelDesc, "llama_model_desc")
	bind(&f.metaValStr, "llama_model_meta_val_str")
	bind(&f.devByName, "ggml_backend_dev_by_name")
	bind(&f.vocabBOS, "llama_vocab_bos")
	bind(&f.vocabAddBOS, "llama_vocab_get_add_bos")
	for _, name := range []string{"llama_model_load_from_file", "llama_init_from_model", "llama_batch_init", "llama_batch_free", "llama_decode"} {
		if _, err := purego.Dlsym(h, name); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s lacks %s: not a llama.cpp build this plugin can drive", llamaPath, strings.Join(missing, ", "))
	}

	// Probe the layout before any struct crosses the boundary.
	mImg, cImg := f.modelDefaults(), f.contextDefaults()
	layout, err := MatchLayout(mImg.B[:], cImg.B[:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", llamaPath, err)
	}
	lib.Layout = layout
	if err := lib.bindLayout(h); err != nil {
		return nil, fmt.Errorf("%s: %w", llamaPath, err)
	}
	if err := lib.probeBatch(h); err != nil {
		return nil, fmt.Errorf("%s: %w", llamaPath, err)
	}

	// CPU (and other) backends may be separate libraries: load them.
	loadDir := dir
	if cpuVariant != "" {
		tmp, err := pinnedVariantDir(dir, cpuVariant)
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		loadDir = tmp
	}
	loadAllFromPath(loadDir)
	backendInit()

	for i := range devCount() {
		d := devGet(i)
		dev := Device{Name: devName(d), Description: devDescription(d), Type: devTypeName(devType(d))}
		if r := devReg(d); r != 0 {
			dev.Backend = regName(r)
		}
		lib.Devices = append(lib.Devices, dev)
	}
	lib.SystemInfo = strings.TrimSpace(systemInfo())
	lib.CPUVariant = loadedCPUVariant()
	if !slices.ContainsFunc(lib.Devices, func(d Device) bool { return d.Type == "cpu" }) {
		if cpuVariant != "" {
			return nil, fmt.Errorf("cpu_variant %q: ggml did not load it (its ggml_backend_score is 0 on this CPU: it needs instructions this CPU lacks)", cpuVariant)
		}
		return nil, fmt.Errorf("%s: ggml registered no CPU device (no libggml-cpu*.so this CPU can run?)", dir)
	}
	lib.GGML, lib.Commit = optionalVersions(h, dir)
	return lib, nil
}

// optionalVersions reads ggml_version/ggml_commit and, from libllama-common
// when present, llama_commit (a C++ symbol). Missing ones are "unknown".
func optionalVersions(h uintptr, dir string) (ggml, commit string) {
	str := func(h uintptr, name string) string {
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			return ""
		}
		var fn func() string
		purego.RegisterFunc(&fn, sym)
		return fn()
	}
	ggmlVersion, ggmlCommit := str(h, "ggml_version"), str(h, "ggml_commit")
	ggml = strings.TrimSpace(ggmlVersion + " " + ggmlCommit)
	if ggml == "" {
		ggml = "unknown"
	}
	commit = ggmlCommit
	if p := filepath.Join(dir, "libllama-common.so"); fileExists(p) {
		if hc, err := purego.Dlopen(p, DLFlags); err == nil {
			if c := str(hc, "_Z12llama_commitv"); c != "" {
				commit = c
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return ggml, commit
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// bindLayout registers the functions whose signatures hold mirrored structs.
func (l *Library) bindLayout(h uintptr) error {
	L := l.Layout
	ptr := reflect.TypeFor[uintptr]()
	str := reflect.TypeFor[string]()
	i32 := reflect.TypeFor[int32]()
	reg := func(name string, in []reflect.Type, out []reflect.Type) (reflect.Value, error) {
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			return reflect.Value{}, err
		}
		fn := reflect.New(reflect.FuncOf(in, out, false))
		purego.RegisterFunc(fn.Interface(), sym)
		return fn.Elem(), nil
	}
	var err error
	f := &l.f
	if f.modelLoad, err = reg("llama_model_load_from_file", []reflect.Type{str, L.ModelParams}, []reflect.Type{ptr}); err != nil {
		return err
	}
	if f.initContext, err = reg("llama_init_from_model", []reflect.Type{ptr, L.ContextParams}, []reflect.Type{ptr}); err != nil {
		return err
	}
	if f.batchInit, err = reg("llama_batch_init", []reflect.Type{i32, i32, i32}, []reflect.Type{L.Batch}); err != nil {
		return err
	}
	if f.batchFree, err = reg("llama_batch_free", []reflect.Type{L.Batch}, nil); err != nil {
		return err
	}
	if f.decode, err = reg("llama_decode", []reflect.Type{ptr, L.Batch}, []reflect.Type{i32}); err != nil {
		return err
	}
	return nil
}

// probeBatch checks that llama_batch_init returns what the layout's
// llama_batch describes: n_tokens 0, no embd, five arrays, nothing after.
func (l *Library) probeBatch(h uintptr) error {
	sym, err := purego.Dlsym(h, "llama_batch_init")
	if err != nil {
		return err
	}
	var initProbe func(int32, int32, int32) probeBuf
	purego.RegisterFunc(&initProbe, sym)
	img := initProbe(1, 0, 1)
	t := l.Layout.Batch
	b := NewStruct(t, img.B[:])
	free := func() { l.f.batchFree.Call([]reflect.Value{b.Value()}) }
	for i := t.Size(); i < ProbeSize; i++ {
		if img.B[i] != 0 {
			return fmt.Errorf("llama_batch: byte %d past the %d-byte struct is written: unknown layout (supported: %s)", i, t.Size(), supportedNames())
		}
	}
	var bad []string
	for _, f := range Fields(t) {
		v, _ := b.Get(f.Name)
		switch f.Name {
		case "n_tokens":
			if v != int32(0) {
				bad = append(bad, fmt.Sprintf("n_tokens is %v, want 0", v))
			}
		case "embd":
			if v != unsafe.Pointer(nil) {
				bad = append(bad, "embd is set for embd=0")
			}
		default:
			if v == unsafe.Pointer(nil) {
				bad = append(bad, f.Name+" is NULL")
			}
		}
	}
	if len(bad) > 0 {
		// Do not free: the pointers are not where this layout says.
		return fmt.Errorf("llama_batch_init(1, 0, 1) does not match the %s llama_batch layout: %s", l.Layout.Name, strings.Join(bad, "; "))
	}
	free()
	return nil
}

func devTypeName(t int32) string {
	switch t {
	case 0:
		return "cpu"
	case 1:
		return "gpu"
	case 2:
		return "igpu"
	case 3:
		return "accel"
	case 4:
		return "meta"
	}
	return fmt.Sprintf("type %d", t)
}

// CPUVariants lists the libggml-cpu-<variant>.so files in dir.
func CPUVariants(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu-*.so"))
	var out []string
	for _, p := range m {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "libggml-cpu-"), ".so"))
	}
	sort.Strings(out)
	return out
}

// pinnedVariantDir makes a directory of symlinks to dir's files without the
// other CPU variants, so ggml's loader can only pick the pinned one.
func pinnedVariantDir(dir, variant string) (string, error) {
	variants := CPUVariants(dir)
	if !slices.Contains(variants, variant) {
		if len(variants) == 0 {
			return "", fmt.Errorf("cpu_variant %q: %s has no libggml-cpu-<variant>.so libraries (a build with the CPU backend linked in has nothing to pick)", variant, dir)
		}
		return "", fmt.Errorf("cpu_variant %q: no libggml-cpu-%s.so in %s (available: %s)", variant, variant, dir, strings.Join(variants, ", "))
	}
	tmp, err := os.MkdirTemp("", "evalrun-llamacpp-")
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "libggml-cpu-") && name != "libggml-cpu-"+variant+".so" {
			continue
		}
		if err := os.Symlink(filepath.Join(dir, name), filepath.Join(tmp, name)); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	return tmp, nil
}

// loadedCPUVariant names the CPU backend library mapped into the process.
func loadedCPUVariant() string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	found := ""
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		base := filepath.Base(fields[len(fields)-1])
		switch {
		case strings.HasPrefix(base, "libggml-cpu-") && strings.HasSuffix(base, ".so"):
			return strings.TrimSuffix(strings.TrimPrefix(base, "libggml-cpu-"), ".so")
		case strings.HasPrefix(base, "libggml-cpu.so"):
			found = "built-in"
		}
	}
	if found == "" {
		found = "none"
	}
	return found
}

// ErrNoLibrary reports that no library directory was found.
var ErrNoLibrary = errors.New("no llama.cpp library directory")

// BacktraceEnv, set to 1, keeps ggml's backtrace on an abort (it attaches
// gdb when installed: slow, and it pushes the abort message out of the few
// stderr lines the host keeps of a crashed plugin).
const BacktraceEnv = "EVALRUN_LLAMACPP_BACKTRACE"

// quietAbort sets GGML_NO_BACKTRACE in the C environment (os.Setenv does
// not reach libc without cgo) unless the user asked for backtraces, and
// makes SIGABRT kill the process by the default action after ggml has
// printed its message, instead of the Go runtime's register dump.
func quietAbort() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGABRT)
	if os.Getenv(BacktraceEnv) == "1" || os.Getenv("GGML_NO_BACKTRACE") != "" {
		return
	}
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return
	}
	sym, err := purego.Dlsym(libc, "setenv")
	if err != nil {
		return
	}
	var setenv func(name, value string, overwrite int32) int32
	purego.RegisterFunc(&setenv, sym)
	setenv("GGML_NO_BACKTRACE", "1", 0)
}

// LogEnv selects how much of llama.cpp's log reaches stderr: "warn"
// (default: warnings and errors), "info", "debug" (everything).
const LogEnv = "EVALRUN_LLAMACPP_LOG"

var (
	logMin      int32 = 3 // GGML_LOG_LEVEL_WARN
	logKeepCont bool      // the last line was kept: keep its continuations
	logCallback uintptr
)

// setLogFilter routes llama.cpp's and ggml's log through a filter: by
// default llama.cpp prints every tensor and graph input at load and decode,
// which would bury the lines that matter (a crashed plugin's last stderr
// lines end up in the host's error).
func setLogFilter(h uintptr) {
	switch os.Getenv(LogEnv) {
	case "debug":
		return // llama.cpp's own default: everything
	case "info":
		logMin = 2
	}
	sym, err := purego.Dlsym(h, "llama_log_set")
	if err != nil {
		return
	}
	var logSet func(cb, user uintptr)
	purego.RegisterFunc(&logSet, sym)
	if logCallback == 0 {
		logCallback = purego.NewCallback(func(level int32, text *byte, _ uintptr) {
			keep := level >= logMin && level != 5 // GGML_LOG_LEVEL_CONT
			if level == 5 {
				keep = logKeepCont
			} else {
				logKeepCont = keep
			}
			if keep && text != nil {
				os.Stderr.WriteString(goString(text))
			}
		})
	}
	logSet(logCallback, 0)
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
