package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seamlm/seam/container"
	"github.com/spf13/cobra"
)

func newBenchOpenRangeCmd() *cobra.Command {
	var (
		dir, layers string
		repeat      int
		limit       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "open-range --model DIR --layers A:B [--repeat N] [--limit 50ms]",
		Short: "Time opening one stage's layer range of a container and list the files it maps",
		Long: `Open-range times container.OpenRange(DIR, A, B) (reading and checking the index,
then mapping the range's segment files) and Close, --repeat times, and prints
the minimum, median and maximum of each. It then checks which files the range
mapped, twice: from the range's own list, and on Linux from /proc/self/maps.
Both must be exactly the segments of layers [A, B), plus embed.seg when A is 0
and head.seg when B is the layer count (and embed.seg too for a tied
classifier). It fails if another file was mapped, or if the median open time
exceeds --limit (0: no limit). Mapping reads no weights: pages are read on
first use, which this command does not measure.`,
		Example: `  seam bench open-range --model /tmp/synth.seam --layers 3:5 --repeat 50`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, b, err := parseRange(layers)
			if err != nil {
				return err
			}
			if repeat < 1 || repeat > 1_000_000 {
				return fmt.Errorf("--repeat %d: want 1..1000000", repeat)
			}
			return benchOpenRange(cmd, dir, a, b, repeat, limit)
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "container directory (required)")
	cmd.Flags().StringVar(&layers, "layers", "", "layer range A:B, as a stage serves it (required)")
	cmd.Flags().IntVar(&repeat, "repeat", 20, "number of timed open/close cycles")
	cmd.Flags().DurationVar(&limit, "limit", 50*time.Millisecond, "fail when the median open time exceeds this (0: no limit)")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("layers")
	return cmd
}

func benchOpenRange(cmd *cobra.Command, dir string, a, b, repeat int, limit time.Duration) error {
	c, err := container.Open(dir)
	if err != nil {
		return err
	}
	want, wantBytes, err := expectedRangeFiles(c, a, b)
	if err != nil {
		return err
	}
	var opens, closes []float64 // milliseconds
	var reported, fromProc []string
	procOK := false
	for i := 0; i < repeat; i++ {
		start := time.Now()
		r, err := container.OpenRange(dir, a, b)
		opened := time.Now()
		if err != nil {
			return err
		}
		if i == 0 {
			reported = slices.Sorted(slices.Values(r.MappedFiles()))
			fromProc, procOK = procMappedFiles(dir)
		}
		closeStart := time.Now()
		if err := r.Close(); err != nil {
			return err
		}
		opens = append(opens, msSince(start, opened))
		closes = append(closes, msSince(closeStart, time.Now()))
	}
	out := cmd.OutOrStdout()
	cfg := c.Config()
	fmt.Fprintf(out, "container %s: %d layers; range [%d, %d); %d repeats\n", dir, cfg.NLayers, a, b, repeat)
	fmt.Fprintf(out, "open  (index + map): min %.3f ms, median %.3f ms, max %.3f ms (first %.3f ms)\n",
		slices.Min(opens), median(opens), slices.Max(opens), opens[0])
	fmt.Fprintf(out, "close (unmap):       min %.3f ms, median %.3f ms, max %.3f ms\n",
		slices.Min(closes), median(closes), slices.Max(closes))
	fmt.Fprintf(out, "expected files: %s (%d bytes)\n", strings.Join(want, " "), wantBytes)
	fmt.Fprintf(out, "Range.MappedFiles: %s\n", strings.Join(reported, " "))
	if procOK {
		fmt.Fprintf(out, "/proc/self/maps:   %s\n", strings.Join(fromProc, " "))
	} else {
		fmt.Fprintln(out, "/proc/self/maps:   not available on this system")
	}
	if err := sameFiles("Range.MappedFiles", reported, want); err != nil {
		return err
	}
	if procOK {
		if err := sameFiles("/proc/self/maps", fromProc, want); err != nil {
			return err
		}
	}
	if limit > 0 && median(opens) > float64(limit)/float64(time.Millisecond) {
		return fmt.Errorf("median open time %.3f ms exceeds the limit of %v", median(opens), limit)
	}
	fmt.Fprintf(out, "OK: only the range's files were mapped; median open %.3f ms", median(opens))
	if limit > 0 {
		fmt.Fprintf(out, " (limit %v)", limit)
	}
	fmt.Fprintln(out)
	return nil
}

func msSince(from, to time.Time) float64 { return float64(to.Sub(from)) / float64(time.Millisecond) }

// expectedRangeFiles states, from the format's rule (docs/container.md §1),
// which segment files layers [a, b) need, sorted, and their total size.
func expectedRangeFiles(c *container.Container, a, b int) ([]string, int64, error) {
	cfg := c.Config()
	if b > cfg.NLayers {
		return nil, 0, fmt.Errorf("layer range [%d, %d) is outside the model's %d layers", a, b, cfg.NLayers)
	}
	need := map[string]bool{}
	for i := a; i < b; i++ {
		need[container.LayerSegment(i)] = true
	}
	if a == 0 || (b == cfg.NLayers && cfg.TiedOutput) {
		need[container.EmbedSegment] = true
	}
	if b == cfg.NLayers {
		need[container.HeadSegment] = true
	}
	var files []string
	var size int64
	for _, s := range c.Segments() {
		if need[s.Name] {
			files = append(files, s.File)
			size += s.Size
		}
	}
	slices.Sort(files)
	return files, size, nil
}

// procMappedFiles lists the base names of the files under dir that this
// process has mapped, from /proc/self/maps; false when that file is absent.
func procMappedFiles(dir string) ([]string, bool) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	abs, err := filepath.Abs(dir)
	if err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
	}
	prefix := abs + string(filepath.Separator)
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path; the path may hold spaces.
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 6 {
			continue
		}
		path := strings.TrimSpace(fields[5])
		if strings.HasPrefix(path, prefix) {
			seen[strings.TrimPrefix(path, prefix)] = true
		}
	}
	if sc.Err() != nil {
		return nil, false
	}
	var files []string
	for name := range seen {
		files = append(files, name)
	}
	slices.Sort(files)
	return files, true
}

// sameFiles fails when got and want (both sorted) differ, naming the extra and
// missing files.
func sameFiles(source string, got, want []string) error {
	if slices.Equal(got, want) {
		return nil
	}
	var extra, missing []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	return fmt.Errorf("%s: mapped files differ from the range's: extra %v, missing %v", source, extra, missing)
}
