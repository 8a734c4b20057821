package model

import "github.com/seamlm/seam/mapped"

// Hooks for the external tests.

// KVBlocksOf is the allocator caches with blocks of bytes take from.
func KVBlocksOf(bytes int) (*mapped.Blocks, error) { return kvBlocks(bytes) }

// SetGetBlock replaces how caches take a block; nil restores it.
func SetGetBlock(f func(*mapped.Blocks) ([]byte, error)) {
	if f == nil {
		f = (*mapped.Blocks).Get
	}
	getBlock = f
}

// Shrink gives back the blocks past positions [0, end).
func (s *State) Shrink(end int) { s.kv.shrink(end) }

// BlockBytes is the bytes of one block of every layer's keys and values.
func (s *State) BlockBytes() int64 { return s.kv.blockBytes() }
