package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RangeReport summarises a successful VerifyLayers.
type RangeReport struct {
	Report
	First, Last int
	Checked     []string // segment files hashed: exactly what layers [First, Last) map
	Absent      []string // other segments' files, absent as a partial container allows
	Present     []string // other segments' files that are here too (not checked)
}

// SegmentsFor names the segments a stage serving layers [a, b) maps (see
// OpenRange): its layers, the embedding for a first stage (and for a last
// stage with a tied classifier), and the head for a last stage.
func (c *Container) SegmentsFor(a, b int) ([]Segment, error) {
	n := c.l.cfg.NLayers
	if a < 0 || b > n || a >= b {
		return nil, fmt.Errorf("%s: layer range [%d, %d) is not a non-empty range within the model's [0, %d)", c.dir, a, b, n)
	}
	segs := c.l.segments // embed, layer-000 ... layer-(n-1), head
	var out []Segment
	if a == 0 || (b == n && c.l.cfg.TiedOutput) {
		out = append(out, segs[0])
	}
	out = append(out, segs[1+a:1+b]...)
	if b == n {
		out = append(out, segs[n+1])
	}
	return out, nil
}

// VerifyLayers checks a partial container: a stage's folder holding the
// index and only the segment files its layers [a, b) need (docs/container.md,
// "Partial containers"). It checks the index as Verify does, then hashes
// exactly the segments the range maps, and the codecs attached at its two
// boundaries; the tokenizer when its file is present. Other segments may be
// absent. progress is as for VerifyProgress.
func (c *Container) VerifyLayers(a, b int, progress func(done, total int64)) (*RangeReport, error) {
	need, err := c.SegmentsFor(a, b)
	if err != nil {
		return nil, err
	}
	rep := &RangeReport{Report: Report{Generation: c.l.generation, Config: c.l.cfg, Identity: c.l.identity}, First: a, Last: b}
	var total int64
	needed := map[string]bool{}
	for _, s := range need {
		needed[s.Name] = true
		for _, r := range s.Regions {
			total += r.Length
		}
	}
	for _, s := range c.l.segments {
		if needed[s.Name] {
			continue
		}
		if _, err := os.Stat(filepath.Join(c.dir, s.File)); err == nil {
			rep.Present = append(rep.Present, s.File)
		} else {
			rep.Absent = append(rep.Absent, s.File)
		}
	}
	buf := make([]byte, defaultBufferSize)
	for _, s := range need {
		n, err := c.verifySegment(s, buf, func(in int64) {
			if progress != nil {
				progress(rep.Bytes+in, total)
			}
		})
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("segment %s (%s) is missing, and layers [%d, %d) need it: %w", s.Name, s.File, a, b, err)
			}
			return nil, err
		}
		rep.Segments++
		rep.Regions += len(s.Regions)
		rep.Bytes += n
		rep.Checked = append(rep.Checked, s.File)
	}
	if t := c.l.tokenizer; t != nil {
		if _, err := os.Stat(filepath.Join(c.dir, t.File)); err == nil {
			if _, err := c.Tokenizer(); err != nil {
				return nil, err
			}
			rep.Tokenizer = true
		}
	}
	for _, ci := range c.l.codecs {
		if ci.Boundary != a && ci.Boundary != b {
			continue
		}
		if _, err := c.Codec(ci.Boundary); err != nil {
			return nil, fmt.Errorf("layers [%d, %d) use the codec at boundary %d: %w", a, b, ci.Boundary, err)
		}
		rep.Codecs++
	}
	return rep, nil
}
