//go:build unix

// Package lockfile takes advisory, non-blocking exclusive locks on open
// files and directories, so that two imports into one folder or two
// downloads into one file refuse each other instead of interleaving.
package lockfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock takes an exclusive lock on f (a file or a directory opened for
// reading), released when f is closed or the process exits.
func Lock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
