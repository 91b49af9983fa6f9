package llama

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// cStructs maps the mirrored struct types to their C names.
func cStructs(l *Layout) map[string]reflect.Type {
	return map[string]reflect.Type{
		"struct llama_model_params":   l.ModelParams,
		"struct llama_context_params": l.ContextParams,
		"struct llama_batch":          l.Batch,
	}
}

// headerDir holds the version's llama.h and ggml headers (MIT, copied from
// llama.cpp at the version's tag; see testdata/README.md).
func headerDir(l *Layout) string {
	return filepath.Join("..", "testdata", "llama.cpp-"+l.Name)
}

// TestLayoutMatchesHeader compiles a C program against the version's real
// llama.h that prints sizeof and offsetof of every mirrored field, and
// compares them with the Go structs; it also checks that the header's
// structs have no field the Go mirror lacks.
func TestLayoutMatchesHeader(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the layout cannot be checked against llama.h")
	}
	for _, l := range Layouts {
		t.Run(l.Name, func(t *testing.T) {
			dir := headerDir(l)
			header, err := os.ReadFile(filepath.Join(dir, "llama.h"))
			if err != nil {
				t.Fatalf("the layout test needs the version's header: %v", err)
			}
			var prog strings.Builder
			prog.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include \"llama.h\"\nint main(void) {\n")
			var want []string
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range cStructs(l) {
					if !yield(k) {
						return
					}
				}
			})
			for _, cname := range names {
				typ := cStructs(l)[cname]
				fmt.Fprintf(&prog, "  printf(\"%s size %%zu\\n\", sizeof(%s));\n", cname, cname)
				want = append(want, fmt.Sprintf("%s size %d", cname, typ.Size()))
				for _, f := range Fields(typ) {
					fmt.Fprintf(&prog, "  printf(\"%s.%s offset %%zu size %%zu\\n\", offsetof(%s, %s), sizeof(((%s *)0)->%s));\n",
						cname, f.Name, cname, f.Name, cname, f.Name)
					want = append(want, fmt.Sprintf("%s.%s offset %d size %d", cname, f.Name, f.Offset, f.Size))
				}
				// Every field the header declares is mirrored.
				declared := structFields(t, string(header), strings.TrimPrefix(cname, "struct "))
				var mirrored []string
				for _, f := range Fields(typ) {
					mirrored = append(mirrored, f.Name)
				}
				if !slices.Equal(declared, mirrored) {
					t.Errorf("%s: llama.h declares %v, the Go mirror has %v", cname, declared, mirrored)
				}
			}
			prog.WriteString("  return 0;\n}\n")
			tmp := t.TempDir()
			src := filepath.Join(tmp, "layout.c")
			if err := os.WriteFile(src, []byte(prog.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(tmp, "layout")
			if out, err := exec.Command(gcc, "-std=c11", "-I", dir, "-o", bin, src).CombinedOutput(); err != nil {
				t.Fatalf("gcc: %v\n%s", err, out)
			}
			out, err := exec.Command(bin).Output()
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(string(out)), "\n")
			if !slices.Equal(got, want) {
				t.Errorf("C layout:\n%s\nGo layout:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

var (
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	lineComment  = regexp.MustCompile(`//[^\n]*`)
	lastIdent    = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(\[[^\]]*\])?\s*$`)
)

// structFields lists the field names of `struct name { ... }` (or the
// typedef'd `typedef struct name { ... } name;`) in a header.
func structFields(t *testing.T, header, name string) []string {
	t.Helper()
	i := strings.Index(header, "struct "+name+" {")
	if i < 0 {
		t.Fatalf("llama.h has no struct %s", name)
	}
	body := header[i+len("struct "+name+" {"):]
	body = body[:strings.Index(body, "}")]
	body = lineComment.ReplaceAllString(blockComment.ReplaceAllString(body, ""), "")
	var names []string
	for _, decl := range strings.Split(body, ";") {
		decl = strings.TrimSpace(decl)
		if decl == "" {
			continue
		}
		m := lastIdent.FindStringSubmatch(decl)
		if m == nil {
			t.Fatalf("struct %s: cannot read the declaration %q", name, decl)
		}
		names = append(names, m[1])
	}
	return names
}

// image encodes a mirrored struct value as the bytes a probe would see.
func image[T any](v *T, size int) []byte {
	b := make([]byte, size)
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)))
	return b
}

func defaultsV050() (*modelParamsV050, *contextParamsV050) {
	m := &modelParamsV050{NGPULayers: -1, SplitMode: 1, LoadMode: -1, LazyMode: 1, UseExtraBufts: true}
	c := &contextParamsV050{NCtx: 512, NBatch: 2048, NUBatch: 512, NSeqMax: 1, NOutputsMaxPerSeq: 1, NThreads: 4, NThreadsBatch: 4,
		RopeScalingType: -1, PoolingType: -1, AttentionType: -1, FlashAttnType: -1,
		YarnExtFactor: -1, YarnAttnFactor: -1, YarnBetaFast: -1, YarnBetaSlow: -1, DefragThold: -1,
		TypeK: 1, TypeV: 1, OffloadKQV: true, NoPerf: true, OpOffload: true, SWAFull: true}
	return m, c
}

func TestProbeRecognisesV050(t *testing.T) {
	m, c := defaultsV050()
	l, err := MatchLayout(image(m, ProbeSize), image(c, ProbeSize))
	if err != nil || l != layoutV050 {
		t.Fatalf("MatchLayout(v0.5.0 defaults) = %v, %v", l, err)
	}
	// The padding holds whatever the callee left there (compilers need not
	// write it): still v0.5.0.
	mi := image(m, ProbeSize)
	mi[36], mi[79] = 0xaa, 0xaa
	if _, err := MatchLayout(mi, image(c, ProbeSize)); err != nil {
		t.Errorf("garbage in padding refused: %v", err)
	}
}

// TestProbeRefusesForeignLayouts: libraries whose structs are laid out
// differently are refused with a message that says what differed.
func TestProbeRefusesForeignLayouts(t *testing.T) {
	m, c := defaultsV050()

	// llama.cpp b10587: llama_model_params without lazy_mode (72 bytes):
	// main_gpu moves to offset 28 and the booleans to 64.
	b10587 := make([]byte, ProbeSize)
	copy(b10587, image(m, ProbeSize)[:28])
	copy(b10587[28:], []byte{0, 0, 0, 0})       // main_gpu
	copy(b10587[64:], []byte{0, 0, 1, 0, 0, 0}) // vocab_only .. load_mtp
	for i := 32; i < 64; i++ {
		b10587[i] = 0
	}
	for i := 70; i < ProbeSize; i++ {
		b10587[i] = 0
	}
	_, err := MatchLayout(b10587, image(c, ProbeSize))
	if err == nil || !strings.Contains(err.Error(), "unknown llama.cpp struct layout") || !strings.Contains(err.Error(), "lazy_mode at offset 28 is 0, want 1") {
		t.Errorf("b10587-like llama_model_params: err = %v", err)
	}

	// A larger llama_context_params that writes past the known 160 bytes.
	ci := image(c, ProbeSize)
	ci[160] = 1
	_, err = MatchLayout(image(m, ProbeSize), ci)
	if err == nil || !strings.Contains(err.Error(), "byte 160 past the 160-byte struct") {
		t.Errorf("larger llama_context_params: err = %v", err)
	}

	// A changed default (another version's n_batch).
	c2 := *c
	c2.NBatch = 512
	_, err = MatchLayout(image(m, ProbeSize), image(&c2, ProbeSize))
	if err == nil || !strings.Contains(err.Error(), "n_batch at offset 4 is 512, want 2048") {
		t.Errorf("changed default: err = %v", err)
	}
}

// TestStructSetGet: fields are set by C name with their Go type only.
func TestStructSetGet(t *testing.T) {
	m, _ := defaultsV050()
	s := NewStruct(layoutV050.ModelParams, image(m, ProbeSize))
	if err := s.Set("n_gpu_layers", int32(7)); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Get("n_gpu_layers"); v != int32(7) {
		t.Errorf("n_gpu_layers = %v", v)
	}
	if v, _ := s.Get("use_extra_bufts"); v != true {
		t.Errorf("use_extra_bufts = %v (the image's default was not kept)", v)
	}
	if err := s.Set("n_gpu_layers", 7); err == nil {
		t.Error("an int for an int32 field was accepted")
	}
	if err := s.Set("use_mmap", true); err == nil || !strings.Contains(err.Error(), "no field use_mmap") {
		t.Errorf("unknown field: %v", err)
	}
}

// TestOpenRefusesForeignLibrary loads a real library of another layout when
// one is available (llama.cpp b10587 from the shared tools, or
// EVALRUN_LLAMACPP_FOREIGN_DIR), in a child process so this one stays free
// to load a supported build.
func TestOpenRefusesForeignLibrary(t *testing.T) {
	if dir := os.Getenv("TEST_EVALRUN_OPEN_DIR"); dir != "" {
		_, err := Open(dir, "")
		fmt.Printf("OPEN-RESULT: %v\n", err)
		return
	}
	dir := os.Getenv("EVALRUN_LLAMACPP_FOREIGN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "tools", "llama.cpp")
	}
	if _, err := os.Stat(filepath.Join(dir, "libllama.so.0")); err != nil {
		if _, err2 := os.Stat(filepath.Join(dir, "libllama.so")); err2 != nil {
			t.Skipf("no foreign llama.cpp build to refuse (%v); set EVALRUN_LLAMACPP_FOREIGN_DIR", err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenRefusesForeignLibrary$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TEST_EVALRUN_OPEN_DIR="+dir)
	out, _ := cmd.CombinedOutput()
	i := bytes.Index(out, []byte("OPEN-RESULT: "))
	if i < 0 {
		t.Fatalf("child printed no result (did it crash?):\n%s", tail(out))
	}
	line := string(out[i:])
	line = line[:strings.IndexByte(line, '\n')]
	t.Log(line)
	if !strings.Contains(line, "unknown llama.cpp struct layout") || !strings.Contains(line, "lazy_mode") {
		t.Errorf("a b10587 library was not refused for its layout: %s", line)
	}
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// TestPinnedCPUVariant opens the installed build with cpu_variant x64 (the
// baseline every x86-64 CPU runs) in a child process and checks that ggml
// loaded exactly that library; an unknown variant is refused with the list.
func TestPinnedCPUVariant(t *testing.T) {
	if v := os.Getenv("TEST_EVALRUN_VARIANT"); v != "" {
		lib, err := Open(os.Getenv("TEST_EVALRUN_OPEN_DIR"), v)
		if err != nil {
			fmt.Printf("VARIANT-RESULT: error %v\n", err)
			return
		}
		fmt.Printf("VARIANT-RESULT: loaded %s\n", lib.CPUVariant)
		return
	}
	dir := os.Getenv("EVALRUN_LLAMACPP_LIB_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "third_party", "llamacpp", "v0.5.0")
	}
	if !slices.Contains(CPUVariants(dir), "x64") {
		t.Skipf("no libggml-cpu-x64.so in %s (run `make llamacpp`)", dir)
	}
	run := func(variant string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPinnedCPUVariant$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TEST_EVALRUN_OPEN_DIR="+dir, "TEST_EVALRUN_VARIANT="+variant)
		out, _ := cmd.CombinedOutput()
		i := bytes.Index(out, []byte("VARIANT-RESULT: "))
		if i < 0 {
			t.Fatalf("child printed no result:\n%s", tail(out))
		}
		line := string(out[i+len("VARIANT-RESULT: "):])
		return line[:strings.IndexByte(line, '\n')]
	}
	if got := run("x64"); got != "loaded x64" {
		t.Errorf("cpu_variant x64: %s", got)
	}
	// AMX: loads on Sapphire Rapids, refused (score 0) on other CPUs.
	if got := run("sapphirerapids"); got != "loaded sapphirerapids" && !strings.Contains(got, "ggml_backend_score is 0 on this CPU") {
		t.Errorf("cpu_variant sapphirerapids: %s", got)
	} else {
		t.Logf("cpu_variant sapphirerapids: %s", got)
	}
	if got := run("pentium"); !strings.Contains(got, `cpu_variant "pentium": no libggml-cpu-pentium.so`) || !strings.Contains(got, "available: alderlake, cannonlake") {
		t.Errorf("cpu_variant pentium: %s", got)
	}
}
