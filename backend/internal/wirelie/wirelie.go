// Package wirelie lets the host's tests make a plugin lie below the Backend
// interface, in the EvalChunk messages themselves (backend/backendtest/liar).
// Nothing else sets it.
package wirelie

import "github.com/evalrun/evalrun/backend/internal/backendpb"

// Chunk, when set, is called with every EvalChunk a plugin's server is
// about to send, and the shared rows region it maps (nil: none); it may
// change both.
var Chunk func(c *backendpb.EvalChunk, region []byte)
