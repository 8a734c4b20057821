package main

import (
	"bufio"
	"fmt"
	"time"

	"github.com/seamlm/seam/generate"
)

// speeds describes a generation's timing in one line, whatever its length.
func speeds(st generate.Stats) string {
	pre := fmt.Sprintf("prefill: %d tokens in %v", st.PromptTokens, st.Prefill.Round(time.Microsecond))
	if st.Prefill > 0 {
		pre += fmt.Sprintf(" (%.1f tok/s)", float64(st.PromptTokens)/st.Prefill.Seconds())
	}
	// The first generated token comes from the prefill; each later one is a
	// decode step.
	dec := "decode: no steps (the one generated token comes from the prefill)"
	if n := st.GeneratedTokens - 1; n > 0 {
		dec = fmt.Sprintf("decode: %d tokens in %v", n, st.Decode.Round(time.Microsecond))
		if st.Decode > 0 {
			dec += fmt.Sprintf(" (%.1f tok/s)", float64(n)/st.Decode.Seconds())
		}
	} else if st.GeneratedTokens == 0 {
		dec = "decode: no steps"
	}
	stop := ""
	if st.StopReason != "" {
		stop = ", stop: " + st.StopReason
	}
	return fmt.Sprintf("%s; %s; %d generated%s", pre, dec, st.GeneratedTokens, stop)
}

// flushWriter flushes after every piece so text streams as it is produced.
type flushWriter struct{ w *bufio.Writer }

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}
