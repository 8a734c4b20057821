package model

import (
	"errors"
	"fmt"
	"sync"
)

// DefaultKVBlock is the positions per KV cache block: small enough that a
// short session holds little more than it uses (16 positions of a
// stories110M layer are 48 KiB of keys and values), large enough that the
// attention kernels run over long contiguous rows.
const DefaultKVBlock = 16

// ErrKVBudget: the KV pool's byte budget has no room for the blocks a
// computation needs.
var ErrKVBudget = errors.New("KV cache budget exhausted")

// KVPool accounts the KV cache blocks of many sessions against one byte
// budget: a State takes blocks as its positions fill and gives them back
// when released, so that memory follows use rather than sessions times the
// context. It is safe for concurrent use.
type KVPool struct {
	block  int   // positions per block
	budget int64 // bytes; 0 is unbounded

	mu   sync.Mutex
	used int64
	peak int64
}

// NewKVPool returns a pool of blocks of block positions (DefaultKVBlock
// when 0) under budget bytes (0: unbounded, only counted).
func NewKVPool(budget int64, block int) (*KVPool, error) {
	if block == 0 {
		block = DefaultKVBlock
	}
	if block < 1 || block > 1<<16 {
		return nil, fmt.Errorf("KV block of %d positions: want 1 to 65536", block)
	}
	if budget < 0 {
		return nil, fmt.Errorf("KV budget of %d bytes: want 0 (unbounded) or more", budget)
	}
	return &KVPool{block: block, budget: budget}, nil
}

// Block is the positions per block.
func (p *KVPool) Block() int { return p.block }

// Budget is the byte budget (0: unbounded).
func (p *KVPool) Budget() int64 { return p.budget }

// Used is the bytes of blocks held now; Peak the most held at once.
func (p *KVPool) Used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Peak is the most bytes held at once since the pool was made.
func (p *KVPool) Peak() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// reserve accounts bytes more, or refuses them all.
func (p *KVPool) reserve(bytes int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.budget > 0 && p.used+bytes > p.budget {
		return fmt.Errorf("%d more bytes of KV cache would hold %d of a budget of %d: %w", bytes, p.used+bytes, p.budget, ErrKVBudget)
	}
	p.used += bytes
	p.peak = max(p.peak, p.used)
	return nil
}

func (p *KVPool) release(bytes int64) {
	p.mu.Lock()
	p.used -= bytes
	p.mu.Unlock()
}

// kvCache is one session's keys and values for its layers, in blocks.
type kvCache struct {
	pool       *KVPool
	block      int
	width      int           // KVDim
	keys, vals [][][]float32 // per held layer, per block: block x width
}

// blockBytes is the bytes of one block's keys and values over all layers.
func (kv *kvCache) blockBytes() int64 {
	return int64(len(kv.keys)) * 2 * int64(kv.block) * int64(kv.width) * 4
}

// ensure makes blocks cover positions [0, end) in every layer, taking them
// from the pool all at once or not at all.
func (kv *kvCache) ensure(end int) error {
	have := len(kv.keys[0])
	need := (end + kv.block - 1) / kv.block
	if need <= have {
		return nil
	}
	if kv.pool != nil {
		if err := kv.pool.reserve(int64(need-have) * kv.blockBytes()); err != nil {
			return err
		}
	}
	for l := range kv.keys {
		for range need - have {
			kv.keys[l] = append(kv.keys[l], make([]float32, kv.block*kv.width))
			kv.vals[l] = append(kv.vals[l], make([]float32, kv.block*kv.width))
		}
	}
	return nil
}

// release gives every block back.
func (kv *kvCache) release() {
	if n := len(kv.keys[0]); n > 0 && kv.pool != nil {
		kv.pool.release(int64(n) * kv.blockBytes())
	}
	for l := range kv.keys {
		kv.keys[l], kv.vals[l] = nil, nil
	}
}

// bytes is what the cache holds now.
func (kv *kvCache) bytes() int64 { return int64(len(kv.keys[0])) * kv.blockBytes() }

// row is the key (or value) row of layer l at position p.
func row(blocks [][]float32, block, width, p int) []float32 {
	b := blocks[p/block]
	o := (p % block) * width
	return b[o : o+width]
}

// shrink gives back the blocks past what positions [0, end) need: undoes
// an ensure whose batch was then refused.
func (kv *kvCache) shrink(end int) {
	need := (end + kv.block - 1) / kv.block
	have := len(kv.keys[0])
	if need >= have {
		return
	}
	if kv.pool != nil {
		kv.pool.release(int64(have-need) * kv.blockBytes())
	}
	for l := range kv.keys {
		kv.keys[l], kv.vals[l] = kv.keys[l][:need], kv.vals[l][:need]
	}
}
