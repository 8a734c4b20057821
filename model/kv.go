package model

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/seamlm/seam/internal/half"
	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/mapped"
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
	*kvMem
	block   int
	width   int  // KVDim
	headDim int  // HeadDim: width is KVHeads x headDim
	half    bool // f16 blocks in hkeys, hvals instead
}

// kvMem is the memory a kvCache holds: blocks from the allocator of their
// size (mapped.Blocks) and the bytes they count in the pool. It is its own
// object so that a State dropped without Release can give them back when
// it is collected (runtime.AddCleanup on the State, with this as argument).
type kvMem struct {
	alloc      *mapped.Blocks
	pool       *KVPool
	sets       int           // blocks per layer counted in pool (ensure counts them before taking them)
	setBytes   int64         // bytes of one block of every layer's keys and values
	keys, vals [][][]float32 // per held layer, per block: KVHeads x block x headDim
	hkeys      [][][]uint16
	hvals      [][][]uint16
}

// newKVCache makes the empty cache of layers layers.
func newKVCache(pool *KVPool, layers, block, width, headDim int, half bool) (kvCache, error) {
	size := 4
	if half {
		size = 2
	}
	alloc, err := kvBlocks(block * width * size)
	if err != nil {
		return kvCache{}, err
	}
	mem := &kvMem{alloc: alloc, pool: pool, setBytes: int64(layers) * 2 * int64(block*width*size)}
	if half {
		mem.hkeys, mem.hvals = make([][][]uint16, layers), make([][][]uint16, layers)
	}
	// keys and vals have an entry per layer even in an f16 cache (left
	// empty): free and ensure count the layers by them.
	mem.keys, mem.vals = make([][][]float32, layers), make([][][]float32, layers)
	return kvCache{kvMem: mem, block: block, width: width, headDim: headDim, half: half}, nil
}

// getBlock takes a block; tests make it fail.
var getBlock = (*mapped.Blocks).Get

// kvAllocs holds one block allocator per block size, shared by every cache
// of the process.
var kvAllocs sync.Map // int -> *mapped.Blocks

func kvBlocks(bytes int) (*mapped.Blocks, error) {
	if a, ok := kvAllocs.Load(bytes); ok {
		return a.(*mapped.Blocks), nil
	}
	a, err := mapped.NewBlocks(bytes)
	if err != nil {
		return nil, fmt.Errorf("KV blocks: %w", err)
	}
	v, _ := kvAllocs.LoadOrStore(bytes, a)
	return v.(*mapped.Blocks), nil
}

// free gives back blocks from and after of every layer (some layers may
// hold fewer, when an ensure failed half way), and the pool's count of
// them.
func (m *kvMem) free(from int) {
	for l := range m.keys {
		m.keys[l], m.vals[l] = giveBack(m.alloc, m.keys[l], from), giveBack(m.alloc, m.vals[l], from)
		if m.hkeys != nil {
			m.hkeys[l], m.hvals[l] = giveBack(m.alloc, m.hkeys[l], from), giveBack(m.alloc, m.hvals[l], from)
		}
	}
	if m.sets > from {
		if m.pool != nil {
			m.pool.release(int64(m.sets-from) * m.setBytes)
		}
		m.sets = from
	}
}

// giveBack returns blocks[from:] to a and keeps the rest, capacity
// included, so that no slot still points at a block given back.
func giveBack[T float32 | uint16](a *mapped.Blocks, blocks [][]T, from int) [][]T {
	from = min(from, len(blocks))
	for _, b := range blocks[from:] {
		a.Put(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), a.Size()))
	}
	return blocks[:from:from]
}

// view is block b as n values of T.
func view[T float32 | uint16](b []byte, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// freeAll is the cleanup of a State collected while holding blocks.
func (m *kvMem) freeAll() { m.free(0) }

// blockBytes is the bytes of one block's keys and values over all layers.
func (kv *kvCache) blockBytes() int64 { return kv.setBytes }

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
	kv.sets = need
	n := kv.block * kv.width
	for b := have; b < need; b++ {
		for l := range kv.keys {
			k, err := getBlock(kv.alloc)
			if err != nil {
				kv.free(have)
				return fmt.Errorf("KV cache block %d of layer %d: %w", b, l, err)
			}
			v, err := getBlock(kv.alloc)
			if err != nil {
				kv.alloc.Put(k)
				kv.free(have)
				return fmt.Errorf("KV cache block %d of layer %d: %w", b, l, err)
			}
			if kv.half {
				kv.hkeys[l], kv.hvals[l] = append(kv.hkeys[l], view[uint16](k, n)), append(kv.hvals[l], view[uint16](v, n))
				continue
			}
			kv.keys[l], kv.vals[l] = append(kv.keys[l], view[float32](k, n)), append(kv.vals[l], view[float32](v, n))
		}
	}
	return nil
}

// release gives every block back.
func (kv *kvCache) release() { kv.free(0) }

// bytes is what the cache holds now.
func (kv *kvCache) bytes() int64 { return int64(kv.blocks()) * kv.blockBytes() }

// A block holds each KV head's rows together: head h's row for position
// p (of the block's positions) is at (h*block + p) * headDim. Attention reads
// one head's rows at a time, and this way they are one contiguous run of
// memory rather than headDim values every KVDim.

// rowAt is where KV head h's row for position p lies: in block b, from
// index at (the same in a float32 block and an f16 one), within the head's
// rows of the block (headRows).
func (kv *kvCache) rowAt(p, h int) (b, at int) {
	lo, _ := kv.headRows(h)
	return p / kv.block, lo + p%kv.block*kv.headDim
}

// store writes position p's key and value rows of layer l (index into the
// held layers), rounding them to f16 in a half cache.
func (kv *kvCache) store(l, p int, key, val []float32) {
	hd := kv.headDim
	for h := 0; h*hd < kv.width; h++ {
		b, at := kv.rowAt(p, h)
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

// prefetchRows asks for the rows that store will write position p's keys
// and values of layer l into, every KV head's: a fresh position's rows lie
// in lines no cache holds, and each store into them would first wait for
// its line to be read.
func (kv *kvCache) prefetchRows(l, p int) {
	if p/kv.block >= kv.blocks() {
		return // not ensured yet: store will not run before it is
	}
	hd := kv.headDim
	for h := 0; h*hd < kv.width; h++ {
		b, at := kv.rowAt(p, h)
		kv.prefetch(false, l, b, at, at+hd)
		kv.prefetch(true, l, b, at, at+hd)
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
	if need >= kv.blocks() {
		return
	}
	kv.free(need)
}

// prefetch asks for rows [lo, hi) of block b of layer l's keys (or
// values) to be brought into the caches.
func (kv *kvCache) prefetch(vals bool, l, b, lo, hi int) {
	if kv.half {
		blocks := kv.hkeys[l]
		if vals {
			blocks = kv.hvals[l]
		}
		kernels.Prefetch(blocks[b][lo:hi])
		return
	}
	blocks := kv.keys[l]
	if vals {
		blocks = kv.vals[l]
	}
	kernels.Prefetch(blocks[b][lo:hi])
}
