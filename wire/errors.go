package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Sentinel errors classify every failure this package reports; wrap-aware
// callers test them with errors.Is and map them to an ErrorCode with CodeOf.
var (
	// ErrMalformed: bytes that do not follow the layout (bad magic, unknown
	// kind or flag, a field that must be zero is not, trailing bytes, ...).
	ErrMalformed = errors.New("malformed frame")
	// ErrGeneration: a protocol generation this side does not speak.
	ErrGeneration = errors.New("unsupported protocol generation")
	// ErrLimit: a declared size beyond a configured limit.
	ErrLimit = errors.New("limit exceeded")
	// ErrChecksum: the CRC32C does not match the bytes received.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrEncoding: an activation encoding or codec this side does not know.
	ErrEncoding = errors.New("unsupported encoding")
	// ErrNonFinite: a NaN or infinity among activations or scales.
	ErrNonFinite = errors.New("non-finite value")
	// ErrHandshake: the two ends of a boundary disagree.
	ErrHandshake = errors.New("handshake mismatch")
	// ErrSession: a frame names a session that is unknown here, not the
	// sender's, full, or out of order (positions past what is cached).
	ErrSession = errors.New("session error")
)

// ErrorCode is the code carried by an Error frame.
type ErrorCode uint16

// Error codes. Zero is never sent.
const (
	CodeMalformed  ErrorCode = 1  // a frame did not follow the layout
	CodeGeneration ErrorCode = 2  // no common protocol generation
	CodeHandshake  ErrorCode = 3  // handshake fields disagree
	CodeEncoding   ErrorCode = 4  // unknown or unsupported encoding or codec
	CodeLimit      ErrorCode = 5  // a declared size is beyond a limit
	CodeChecksum   ErrorCode = 6  // CRC32C mismatch
	CodeNonFinite  ErrorCode = 7  // NaN or infinity in activations
	CodeSession    ErrorCode = 8  // unknown session, or a position out of order
	CodeInternal   ErrorCode = 9  // the stage failed while computing
	CodeShutdown   ErrorCode = 10 // the stage is shutting down
	numCodes                 = 11
)

var codeNames = [numCodes]string{"", "malformed", "generation", "handshake", "encoding", "limit",
	"checksum", "non-finite", "session", "internal", "shutdown"}

func (c ErrorCode) String() string {
	if c > 0 && c < numCodes {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint16(c))
}

// Valid reports whether c is a code this generation defines.
func (c ErrorCode) Valid() bool { return c > 0 && c < numCodes }

// CodeOf maps an error from this package to the code to send to the peer.
// Errors it does not classify are CodeInternal.
func CodeOf(err error) ErrorCode {
	pairs := []struct {
		err  error
		code ErrorCode
	}{
		{ErrChecksum, CodeChecksum}, {ErrGeneration, CodeGeneration}, {ErrLimit, CodeLimit},
		{ErrEncoding, CodeEncoding}, {ErrNonFinite, CodeNonFinite}, {ErrHandshake, CodeHandshake},
		{ErrMalformed, CodeMalformed}, {ErrSession, CodeSession},
	}
	for _, p := range pairs {
		if errors.Is(err, p.err) {
			return p.code
		}
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return CodeInternal
}

// MaxErrorMessage bounds the message of an Error frame, in bytes.
const MaxErrorMessage = 1024

// RemoteError is an Error frame received from the peer.
type RemoteError struct {
	Code    ErrorCode
	Message string
	Session uint64
	Request uint64
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("peer error %s (session %d, request %d): %s", e.Code, e.Session, e.Request, e.Message)
}

// ErrorPayload is the body of an Error frame.
//
//	offset size field
//	0      2    code (u16, 1..10)
//	2      2    message length n (u16, <= MaxErrorMessage)
//	4      n    message, UTF-8
type ErrorPayload struct {
	Code    ErrorCode
	Message string
}

// errorFixed is the size of the Error payload without its message.
const errorFixed = 4

// TruncateMessage shortens s to at most MaxErrorMessage bytes on a rune
// boundary, so that any local error text can be sent.
func TruncateMessage(s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // replaces invalid bytes with U+FFFD
	}
	if len(s) <= MaxErrorMessage {
		return s
	}
	cut := MaxErrorMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// AppendErrorPayload appends the encoding of p to dst.
func AppendErrorPayload(dst []byte, p ErrorPayload) ([]byte, error) {
	if !p.Code.Valid() {
		return dst, fmt.Errorf("error payload: code %d is not defined: %w", uint16(p.Code), ErrMalformed)
	}
	if err := checkString("error message", p.Message, MaxErrorMessage); err != nil {
		return dst, err
	}
	dst = le.AppendUint16(dst, uint16(p.Code))
	dst = le.AppendUint16(dst, uint16(len(p.Message)))
	return append(dst, p.Message...), nil
}

// DecodeErrorPayload parses the body of an Error frame.
func DecodeErrorPayload(src []byte) (ErrorPayload, error) {
	if len(src) < errorFixed {
		return ErrorPayload{}, fmt.Errorf("error payload: %d bytes, need at least %d: %w", len(src), errorFixed, ErrMalformed)
	}
	code := ErrorCode(le.Uint16(src))
	n := int(le.Uint16(src[2:]))
	if !code.Valid() {
		return ErrorPayload{}, fmt.Errorf("error payload: code %d is not defined: %w", uint16(code), ErrMalformed)
	}
	if n > MaxErrorMessage {
		return ErrorPayload{}, fmt.Errorf("error payload: message length %d exceeds %d: %w", n, MaxErrorMessage, ErrLimit)
	}
	if len(src) != errorFixed+n {
		return ErrorPayload{}, fmt.Errorf("error payload: message length %d but %d bytes follow: %w", n, len(src)-errorFixed, ErrMalformed)
	}
	msg := string(src[errorFixed:])
	if !utf8.ValidString(msg) {
		return ErrorPayload{}, fmt.Errorf("error payload: message is not valid UTF-8: %w", ErrMalformed)
	}
	return ErrorPayload{Code: code, Message: msg}, nil
}

func checkString(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s is %d bytes, limit %d: %w", what, len(s), max, ErrLimit)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8: %w", what, ErrMalformed)
	}
	return nil
}
