package bench

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
)

// MakeGGUFResult describes a written synthetic GGUF.
type MakeGGUFResult struct {
	Path        string
	Size        int64
	Config      model.Config
	Tensors     int
	TensorBytes int64
	Largest     synth.GGUFTensor // bounds an import's expected peak memory
	Elapsed     time.Duration
}

// MakeGGUF writes a synthetic llama GGUF of cfg under out+".tmp", syncs it
// (so that its write-back does not run during an import measured next) and
// renames it; a failure removes the temporary file.
func MakeGGUF(out string, cfg model.Config, opts synth.GGUFOptions) (*MakeGGUFResult, error) {
	layout, err := synth.GGUFLayout(cfg, opts)
	if err != nil {
		return nil, err
	}
	res := &MakeGGUFResult{Path: out, Config: cfg, Tensors: len(layout), Largest: layout[0]}
	for _, t := range layout {
		res.TensorBytes += t.Bytes
		if t.Bytes > res.Largest.Bytes {
			res.Largest = t
		}
	}
	start := time.Now()
	tmp := out + ".tmp"
	err = writeSynced(tmp, func(f *os.File) error { return synth.WriteGGUF(f, cfg, opts) })
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	res.Elapsed = time.Since(start)
	st, err := os.Stat(out)
	if err != nil {
		return nil, err
	}
	res.Size = st.Size()
	return res, nil
}

func (r *MakeGGUFResult) String() string {
	l := r.Largest
	return fmt.Sprintf("wrote %s: %d bytes (%.3f GiB), %d layers, largest tensor %s (%s %dx%d) %d bytes, in %v (%.0f MB/s)",
		r.Path, r.Size, float64(r.Size)/(1<<30), r.Config.NLayers, l.Name, l.Type, l.Rows, l.Cols, l.Bytes,
		r.Elapsed.Round(time.Millisecond), float64(r.Size)/r.Elapsed.Seconds()/1e6)
}

func writeSynced(path string, fill func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ParseByteSize reads a size such as 2GiB, 1.5GB, 500MiB, 64KiB or 1000 (bytes).
func ParseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	x, err := strconv.ParseFloat(num, 64)
	v := x * mult
	if err != nil || !(v >= 1) || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes with an optional unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB, B)", s)
	}
	return int64(math.Round(v)), nil
}
