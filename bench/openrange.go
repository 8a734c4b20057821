package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seamlm/seam/container"
)

// OpenRangeResult is what OpenRange measured and saw.
type OpenRangeResult struct {
	Dir           string
	Layers        int
	First, Last   int
	Opens, Closes []float64 // milliseconds, one per repeat
	Want          []string  // the files the range must map, by the format's rule
	WantBytes     int64
	Reported      []string // what Range.MappedFiles says
	FromProc      []string // what /proc/self/maps shows
	ProcAvailable bool
}

// OpenRange times container.OpenRange(dir, a, b) and Close, repeat times,
// and records which files the first open mapped, from the range's own list
// and, on Linux, from /proc/self/maps.
func OpenRange(dir string, a, b, repeat int) (*OpenRangeResult, error) {
	if repeat < 1 || repeat > 1_000_000 {
		return nil, fmt.Errorf("--repeat %d: want 1..1000000", repeat)
	}
	c, err := container.Open(dir)
	if err != nil {
		return nil, err
	}
	want, wantBytes, err := expectedRangeFiles(c, a, b)
	if err != nil {
		return nil, err
	}
	res := &OpenRangeResult{Dir: dir, Layers: c.Config().NLayers, First: a, Last: b, Want: want, WantBytes: wantBytes}
	for i := 0; i < repeat; i++ {
		start := time.Now()
		r, err := container.OpenRange(dir, a, b)
		opened := time.Now()
		if err != nil {
			return nil, err
		}
		if i == 0 {
			res.Reported = slices.Sorted(slices.Values(r.MappedFiles()))
			res.FromProc, res.ProcAvailable = procMappedFiles(dir)
		}
		closeStart := time.Now()
		if err := r.Close(); err != nil {
			return nil, err
		}
		res.Opens = append(res.Opens, msSince(start, opened))
		res.Closes = append(res.Closes, msSince(closeStart, time.Now()))
	}
	return res, nil
}

// Report prints the timings and file lists, and fails when another file
// was mapped or the median open time exceeds limit (0: no limit).
func (r *OpenRangeResult) Report(out io.Writer, limit time.Duration) error {
	fmt.Fprintf(out, "container %s: %d layers; range [%d, %d); %d repeats\n", r.Dir, r.Layers, r.First, r.Last, len(r.Opens))
	fmt.Fprintf(out, "open  (index + map): min %.3f ms, median %.3f ms, max %.3f ms (first %.3f ms)\n",
		slices.Min(r.Opens), Median(r.Opens), slices.Max(r.Opens), r.Opens[0])
	fmt.Fprintf(out, "close (unmap):       min %.3f ms, median %.3f ms, max %.3f ms\n",
		slices.Min(r.Closes), Median(r.Closes), slices.Max(r.Closes))
	fmt.Fprintf(out, "expected files: %s (%d bytes)\n", strings.Join(r.Want, " "), r.WantBytes)
	fmt.Fprintf(out, "Range.MappedFiles: %s\n", strings.Join(r.Reported, " "))
	if r.ProcAvailable {
		fmt.Fprintf(out, "/proc/self/maps:   %s\n", strings.Join(r.FromProc, " "))
	} else {
		fmt.Fprintln(out, "/proc/self/maps:   not available on this system")
	}
	if err := sameFiles("Range.MappedFiles", r.Reported, r.Want); err != nil {
		return err
	}
	if r.ProcAvailable {
		if err := sameFiles("/proc/self/maps", r.FromProc, r.Want); err != nil {
			return err
		}
	}
	med := Median(r.Opens)
	if limit > 0 && med > float64(limit)/float64(time.Millisecond) {
		return fmt.Errorf("median open time %.3f ms exceeds the limit of %v", med, limit)
	}
	fmt.Fprintf(out, "OK: only the range's files were mapped; median open %.3f ms", med)
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
