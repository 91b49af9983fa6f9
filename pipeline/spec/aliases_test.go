package spec

import (
	"strings"
	"testing"
)

// TestAliasesCannotMultiplyTheSpec: a spec within MaxSize whose aliases
// repeat a large value (yaml.v3 lets about a hundred through) is refused at
// the alias that crosses the limit, before anything is decoded or sent to a
// plugin; aliases that stay within it (shared backend settings) still work.
func TestAliasesCannotMultiplyTheSpec(t *testing.T) {
	big := strings.Repeat("x", 300<<10)
	text := base + "    options:\n      a: &a \"" + big + "\"\n      b: [*a, *a, *a]\n" // b: is line 14
	if _, err := load(t, text, nil); err != "DIR/t.yaml:14: aliases expand the spec beyond 1024 KiB: not a spec" {
		t.Errorf("a value repeated past MaxSize by aliases: %v", err)
	}
	text = base + "    options:\n      a: &a \"" + big + "\"\n      b: [*a, *a]\n"
	s, err := load(t, text, nil)
	if err != "" || len(s.Candidates[0].Options["b"].([]any)) != 2 {
		t.Errorf("aliases within MaxSize: %v", err)
	}
}
