package mapped

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrFault marks a memory fault while reading mapped bytes: the file behind
// the mapping was truncated or replaced while in use.
var ErrFault = errors.New("fault reading a mapped file")

// addrError is what the runtime panics with when SetPanicOnFault is on and a
// memory access faults.
type addrError interface {
	error
	Addr() uintptr
}

// Guard runs fn with memory faults on this goroutine turned into an error
// wrapping ErrFault instead of a crash of the process. Goroutines that fn
// starts are not covered: each must guard itself and hand its error back.
func Guard(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			ae, ok := r.(addrError)
			if !ok {
				panic(r)
			}
			if path, off, ok := live.at(ae.Addr()); ok {
				err = fmt.Errorf("%w: %s at offset %d: the file shrank or was replaced while mapped", ErrFault, path, off)
			} else {
				err = fmt.Errorf("%w at address %#x: %v", ErrFault, ae.Addr(), ae)
			}
		}
	}()
	return fn()
}
