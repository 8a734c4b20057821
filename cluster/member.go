package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seamlm/seam/wire"
)

// Member is a pool member as it describes itself at handshake.
type Member struct {
	Name string
	Addr string
	// Free is the memory, in bytes, the member offers for weights and KV
	// caches: the smaller of what the system has available and the budget
	// it was started with.
	Free  int64
	Speed Speed
	// Encodings the member decodes (f32 at least). A boundary's encoding
	// must be decodable by the stage after it.
	Encodings []wire.EncodingID
	// Codecs lists the boundaries (layer numbers) at which the member holds
	// a learned codec; lowrank is possible at a boundary only when both
	// neighbours hold the same codec for it.
	Codecs []wire.CodecDigest
}

func (m *Member) String() string {
	if m.Name != "" {
		return m.Name
	}
	return m.Addr
}

// Speed is a member's measured compute time, per token.
type Speed struct {
	DecodeLayer  time.Duration // one layer, one token at a time
	PrefillLayer time.Duration // one layer, per token of a batched prompt
	Head         time.Duration // final norm and classifier, one position
}

// Validate checks that a peer's description can be planned with: every
// figure positive and finite, within sane bounds.
func (m *Member) Validate() error {
	var errs []error
	if m.Free <= 0 {
		errs = append(errs, fmt.Errorf("free memory %d bytes, want > 0", m.Free))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"decode time per layer", m.Speed.DecodeLayer}, {"prefill time per layer", m.Speed.PrefillLayer}, {"classifier time", m.Speed.Head}} {
		if d.v <= 0 || d.v > time.Minute {
			errs = append(errs, fmt.Errorf("%s %v, want in (0, 1m]", d.name, d.v))
		}
	}
	if !hasEncoding(m.Encodings, wire.EncodingF32) {
		errs = append(errs, fmt.Errorf("encodings %v lack f32", m.Encodings))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("member %s: %w", m, err)
	}
	return nil
}

func hasEncoding(list []wire.EncodingID, e wire.EncodingID) bool {
	for _, x := range list {
		if x == e {
			return true
		}
	}
	return false
}

// codecAt returns the member's codec for boundary b.
func (m *Member) codecAt(b int) (wire.CodecDigest, bool) {
	for _, c := range m.Codecs {
		if int(c.Boundary) == b {
			return c, true
		}
	}
	return wire.CodecDigest{}, false
}

// AvailableMemory reads MemAvailable from /proc/meminfo: what the kernel
// estimates can be allocated without swapping.
func AvailableMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading free memory: %w", err)
	}
	defer f.Close()
	return parseMemAvailable(f)
}

func parseMemAvailable(f *os.File) (int64, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: MemAvailable line %q, want \"N kB\"", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			return 0, fmt.Errorf("/proc/meminfo: MemAvailable %q: not a size", fields[0])
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable line")
}

// GiB formats a byte count for messages.
func GiB(b int64) string {
	switch {
	case b >= 1<<30 || b <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	default:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
}
