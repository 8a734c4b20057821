package tokenizer

// ordered is a merge candidate that knows whether it comes before another.
type ordered[T any] interface {
	before(T) bool
}

// minHeap is a binary min-heap of merge candidates by their before order.
// Both encoders keep one per text and reset it with h = h[:0], so pushes and
// pops allocate nothing once it has grown.
type minHeap[T ordered[T]] []T

func (h *minHeap[T]) push(c T) {
	s := append(*h, c)
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
	*h = s
}

func (h *minHeap[T]) pop() T {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, best := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].before(s[best]) {
			best = l
		}
		if r < len(s) && s[r].before(s[best]) {
			best = r
		}
		if best == i {
			break
		}
		s[i], s[best] = s[best], s[i]
		i = best
	}
	*h = s
	return top
}
