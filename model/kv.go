package model

import (
	"errors"
	"fmt"
	"sync"

	"github.com/seamlm/seam/internal/half"
	"github.com/seamlm/seam/kernels"
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
	half   bool  // blocks hold f16 keys and values

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

// NewKVPoolF16 is NewKVPool for caches that store keys and values as f16
// (IEEE binary16, rounded to nearest even): half the memory, at a small
// cost in quality (docs/benchmarks.md measures it). Attention widens them
// back exactly, so results are deterministic on every machine.
func NewKVPoolF16(budget int64, block int) (*KVPool, error) {
	p, err := NewKVPool(budget, block)
	if err == nil {
		p.half = true
	}
	return p, err
}

// F16 says whether the pool's caches hold f16.
func (p *KVPool) F16() bool { return p.half }

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
	headDim    int           // HeadDim: width is KVHeads x headDim
	keys, vals [][][]float32 // per held layer, per block: KVHeads x block x headDim
	half       bool          // f16 blocks in hkeys, hvals instead
	hkeys      [][][]uint16
	hvals      [][][]uint16
}

// blockBytes is the bytes of one block's keys and values over all layers.
func (kv *kvCache) blockBytes() int64 {
	size := int64(4)
	if kv.half {
		size = 2
	}
	return int64(len(kv.keys)) * 2 * int64(kv.block) * int64(kv.width) * size
}

// blocks is how many blocks each layer holds.
func (kv *kvCache) blocks() int {
	if kv.half {
		return len(kv.hkeys[0])
	}
	return len(kv.keys[0])
}

// ensure makes blocks cover positions [0, end) in every layer, taking them
// from the pool all at once or not at all.
func (kv *kvCache) ensure(end int) error {
	have := kv.blocks()
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
			if kv.half {
				kv.hkeys[l] = append(kv.hkeys[l], make([]uint16, kv.block*kv.width))
				kv.hvals[l] = append(kv.hvals[l], make([]uint16, kv.block*kv.width))
				continue
			}
			kv.keys[l] = append(kv.keys[l], make([]float32, kv.block*kv.width))
			kv.vals[l] = append(kv.vals[l], make([]float32, kv.block*kv.width))
		}
	}
	return nil
}

// release gives every block back.
func (kv *kvCache) release() {
	if n := kv.blocks(); n > 0 && kv.pool != nil {
		kv.pool.release(int64(n) * kv.blockBytes())
	}
	for l := range kv.keys {
		kv.keys[l], kv.vals[l] = nil, nil
		if kv.half {
			kv.hkeys[l], kv.hvals[l] = nil, nil
		}
	}
}

// bytes is what the cache holds now.
func (kv *kvCache) bytes() int64 { return int64(kv.blocks()) * kv.blockBytes() }

// A block holds each KV head's rows together: head h's row for position
// p (of the block's positions) is at (h*block + p) * headDim. Attention reads
// one head's rows at a time, and this way they are one contiguous run of
// memory rather than headDim values every KVDim.

// store writes position p's key and value rows of layer l (index into the
// held layers), rounding them to f16 in a half cache.
func (kv *kvCache) store(l, p int, key, val []float32) {
	b, off, hd := p/kv.block, p%kv.block, kv.headDim
	for h := 0; h*hd < kv.width; h++ {
		at := (h*kv.block + off) * hd
		k, v := key[h*hd:(h+1)*hd], val[h*hd:(h+1)*hd]
		if !kv.half {
			copy(kv.keys[l][b][at:at+hd], k)
			copy(kv.vals[l][b][at:at+hd], v)
			continue
		}
		hk, hv := kv.hkeys[l][b][at:at+hd], kv.hvals[l][b][at:at+hd]
		for i := range k {
			hk[i], hv[i] = half.FromF32(k[i]), half.FromF32(v[i])
		}
	}
}

// headRows is where KV head h's rows lie in a block (block x headDim
// values, of which the first n rows are filled when the block is the last).
func (kv *kvCache) headRows(h int) (lo, hi int) {
	return h * kv.block * kv.headDim, (h + 1) * kv.block * kv.headDim
}

// widen copies the first rows rows of KV head h in the f16 block src into
// dst (rows x headDim, contiguous), exactly.
func (kv *kvCache) widen(dst []float32, src []uint16, h, rows int) {
	lo, _ := kv.headRows(h)
	n := rows * kv.headDim
	kernels.WidenF16(dst[:n], src[lo:lo+n])
}

// shrink gives back the blocks past what positions [0, end) need: undoes
// an ensure whose batch was then refused.
func (kv *kvCache) shrink(end int) {
	need := (end + kv.block - 1) / kv.block
	have := kv.blocks()
	if need >= have {
		return
	}
	if kv.pool != nil {
		kv.pool.release(int64(have-need) * kv.blockBytes())
	}
	for l := range kv.keys {
		if kv.half {
			kv.hkeys[l], kv.hvals[l] = kv.hkeys[l][:need], kv.hvals[l][:need]
			continue
		}
		kv.keys[l], kv.vals[l] = kv.keys[l][:need], kv.vals[l][:need]
	}
}
