package llama

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTensorLayout: the ggml_tensor offsets the eval callback reads equal
// the header's.
func TestTensorLayout(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the layout cannot be checked against ggml.h")
	}
	for _, l := range Layouts {
		dir := headerDir(l)
		prog := `#include <stdio.h>
#include <stddef.h>
#include "ggml.h"
int main(void) {
  printf("%zu %zu %zu %zu %zu %zu %zu\n", offsetof(struct ggml_tensor, type), offsetof(struct ggml_tensor, ne),
    offsetof(struct ggml_tensor, nb), offsetof(struct ggml_tensor, op), offsetof(struct ggml_tensor, data),
    offsetof(struct ggml_tensor, name), sizeof(((struct ggml_tensor *)0)->name));
  return 0;
}
`
		tmp := t.TempDir()
		src := filepath.Join(tmp, "t.c")
		if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(tmp, "t")
		if out, err := exec.Command(gcc, "-std=c11", "-I", dir, "-o", bin, src).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d %d %d %d %d %d %d", tensorOffType, tensorOffNe, tensorOffNb, tensorOffOp, tensorOffData, tensorOffName, tensorNameLen)
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("%s: ggml.h offsets %s, Go %s", l.Name, got, want)
		}
	}
}
