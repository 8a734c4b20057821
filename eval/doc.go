// Package eval measures what splitting a model costs: it makes calibration and
// evaluation token streams (sampled from the model itself, or cut from a
// text), captures the hidden states that cross a split boundary, stores them in
// capture files for fitting boundary codecs, fits codecs from captures (to a
// byte budget, a rank, or the smallest budget under a target KL), and compares,
// teacher-forced, a model split at a boundary with each activation encoding
// against the whole model: perplexity, KL divergence and top-1 agreement.
//
// Everything here is deterministic for a given machine: the same model,
// seed and arguments give the same tokens, the same captures and the same
// numbers. Sums over positions and sequences run in a fixed order whatever
// the number of goroutines.
package eval
