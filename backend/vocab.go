package backend

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// VocabDigest identifies a vocabulary: the hex sha256 over n (uint64, little
// endian) followed by every token's text in id order, each as its byte
// length (uint64, little endian) and its bytes. The length prefixes make the
// encoding unambiguous. The host sends the digest of the vocabulary it
// tokenizes with in LoadRequest.VocabDigest; plugins compute it from the
// vocabulary their model reads and refuse a different one.
func VocabDigest(n int, text func(id int) string) string {
	h := sha256.New()
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(n))
	h.Write(buf[:])
	for id := range n {
		t := text(id)
		binary.LittleEndian.PutUint64(buf[:], uint64(len(t)))
		h.Write(buf[:])
		h.Write([]byte(t))
	}
	return hex.EncodeToString(h.Sum(nil))
}
