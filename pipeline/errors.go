package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/seamlm/seam/wire"
)

// StageError is an Error frame a stage sent the head: the request (or, with
// request 0, the whole chain) failed there. errors.As finds the
// *wire.RemoteError beneath it, with the code.
type StageError struct {
	Stage  string // the stage as the head knows it: index, address, name, layers
	Remote *wire.RemoteError
}

func (e *StageError) Error() string {
	msg := e.Remote.Message
	// A stage says `stage "NAME" is shutting down (why)`; when e.Stage
	// already names it, say the name once: `stage 2 (ADDR, "NAME", layers
	// [3,6)) is shutting down (why)`.
	if rest, ok := strings.CutPrefix(msg, "stage "); ok && e.Remote.Code == wire.CodeShutdown {
		if name, err := strconv.QuotedPrefix(rest); err == nil && strings.Contains(e.Stage, name) {
			return e.Stage + rest[len(name):]
		}
	}
	switch e.Remote.Code {
	case wire.CodeInternal, wire.CodeShutdown:
		// The message says it: "is shutting down (SIGTERM)", "may not dial ...".
	default:
		msg = e.Remote.Code.String() + ": " + msg
	}
	return e.Stage + ": " + msg
}

func (e *StageError) Unwrap() error { return e.Remote }

// Shutdown reports whether the stage failed the request because it is
// shutting down.
func (e *StageError) Shutdown() bool { return e.Remote.Code == wire.CodeShutdown }

// prefixReader keeps the first bytes a stage sends, so that a handshake
// that fails on something other than a Seam frame can say what answered.
type prefixReader struct {
	r      io.Reader
	prefix []byte
}

const prefixKeep = 16

func (p *prefixReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if keep := prefixKeep - len(p.prefix); keep > 0 {
		p.prefix = append(p.prefix, b[:min(n, keep)]...)
	}
	return n, err
}

// notSeam describes what answered when it was not a Seam stage ("that
// address answers HTTP"), or returns "" when it may have been one.
func (p *prefixReader) notSeam() string {
	b := p.prefix
	switch {
	case len(b) == 0 || bytes.HasPrefix(b, []byte("SEAM")):
		return ""
	case bytes.HasPrefix(b, []byte("HTTP/")):
		return "that address answers HTTP"
	case bytes.HasPrefix(b, []byte("SSH-")):
		return "that address answers SSH"
	case b[0] == 0x15 || b[0] == 0x16:
		return "that address answers TLS"
	}
	printable := true
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			printable = false
		}
	}
	if printable {
		return fmt.Sprintf("that address answers %q", b)
	}
	return fmt.Sprintf("that address answers bytes % x", b)
}
