package backend

import "testing"

func TestVocabDigest(t *testing.T) {
	vocab := []string{"<unk>", "<s>", "</s>", " a", "b"}
	text := func(v []string) func(int) string { return func(i int) string { return v[i] } }
	// sha256 of the documented encoding, computed independently with
	// python3's hashlib (n=5 then length-prefixed texts, all uint64 LE).
	const want = "0ff1f663757305959efbffb1d1006e4b7a9ee8e584af2bca52c615afe7b51458"
	got := VocabDigest(len(vocab), text(vocab))
	if got != want {
		t.Fatalf("VocabDigest = %s, want %s", got, want)
	}
	for name, other := range map[string][]string{
		"one text changed":  {"<unk>", "<s>", "</s>", " a", "c"},
		"boundary moved":    {"<unk>", "<s>", "</s>", " ab", ""},
		"one token fewer":   {"<unk>", "<s>", "</s>", " a"},
		"two texts swapped": {"<unk>", "<s>", "</s>", "b", " a"},
	} {
		if VocabDigest(len(other), text(other)) == got {
			t.Errorf("%s: same digest as the original vocabulary", name)
		}
	}
	if again := VocabDigest(len(vocab), text(append([]string(nil), vocab...))); again != got {
		t.Errorf("digest not deterministic: %s then %s", got, again)
	}
}
