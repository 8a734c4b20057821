package container

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A stage's folder holding only the index and its own segments opens for
// its range and verifies with VerifyLayers; a corrupted or missing needed
// segment fails, naming it; the whole-container Verify says what is missing.
func TestPartialContainer(t *testing.T) {
	for _, tied := range []bool{false, true} {
		fx := newFixture(tied, 11)
		full := newContainer(t, fx)
		c, err := Open(full)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int{{0, 1}, {1, 3}, {3, 4}, {0, 4}} {
			a, b := r[0], r[1]
			dir := copyDir(t, full)
			need, err := c.SegmentsFor(a, b)
			if err != nil {
				t.Fatal(err)
			}
			var keep []string
			for _, s := range need {
				keep = append(keep, s.File)
			}
			for _, s := range c.Segments() {
				if !slices.Contains(keep, s.File) {
					os.Remove(filepath.Join(dir, s.File))
				}
			}
			os.Remove(filepath.Join(dir, TokenizerFile))
			p, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := p.VerifyLayers(a, b, nil)
			if err != nil {
				t.Fatalf("tied %v [%d,%d): %v", tied, a, b, err)
			}
			if !slices.Equal(rep.Checked, keep) || len(rep.Checked)+len(rep.Absent) != len(c.Segments()) || len(rep.Present) != 0 {
				t.Errorf("tied %v [%d,%d): checked %v, absent %v, present %v; want checked %v", tied, a, b, rep.Checked, rep.Absent, rep.Present, keep)
			}
			rg, err := p.OpenRange(a, b)
			if err != nil {
				t.Fatalf("tied %v [%d,%d): the partial container does not open for its range: %v", tied, a, b, err)
			}
			rg.Close()
			if len(rep.Absent) > 0 {
				if _, err := p.Verify(); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("whole Verify of a partial container: %v", err)
				}
			}
			// Corrupt one needed byte: refused with the region named.
			victim := filepath.Join(dir, keep[len(keep)-1])
			data, _ := os.ReadFile(victim)
			data[len(data)-1] ^= 1
			os.WriteFile(victim, data, 0o644)
			var re *RegionError
			if _, err := p.VerifyLayers(a, b, nil); !errors.As(err, &re) {
				t.Errorf("corrupted %s: %v", victim, err)
			}
			os.Remove(victim)
			if _, err := p.VerifyLayers(a, b, nil); err == nil || !strings.Contains(err.Error(), "is missing") {
				t.Errorf("missing %s: %v", victim, err)
			}
		}
		if _, err := c.VerifyLayers(2, 9, nil); err == nil {
			t.Error("range beyond the model accepted")
		}
	}
}
