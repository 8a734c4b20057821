package model

import "math"

// rmsNorm writes w * x / rms(x) into out; out may alias x.
func rmsNorm(out, x, w []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	ss = ss/float32(len(x)) + eps
	inv := float32(1 / math.Sqrt(float64(ss)))
	for i, v := range x {
		out[i] = w[i] * (inv * v)
	}
}

// softmax normalises x in place, subtracting the maximum for stability.
func softmax(x []float32) {
	maxv := x[0]
	for _, v := range x[1:] {
		maxv = max(maxv, v)
	}
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - maxv)))
		x[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range x {
		x[i] *= inv
	}
}

func add(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}
