//go:build !linux

// Package netns builds a small network of Linux network namespaces for
// tests. Elsewhere there are none: Available says so, and tests skip.
package netns

import (
	"context"
	"errors"
	"net"
	"os/exec"
)

var errNotLinux = errors.New("network namespaces need Linux")

// Link joins two nodes.
type Link struct {
	A, B string
	Mbps float64
}

// Testbed is a set of namespaces joined by links; none can be made here.
type Testbed struct{}

// Available reports why a testbed cannot be made here.
func Available() error { return errNotLinux }

// New fails: there are no network namespaces here.
func New(nodes []string, links []Link) (*Testbed, error) { return nil, errNotLinux }

func (tb *Testbed) Host(node string) string                        { return "" }
func (tb *Testbed) Addr(from, to string) (string, error)           { return "", errNotLinux }
func (tb *Testbed) Namespace(node string) string                   { return "" }
func (tb *Testbed) Start(cmd *exec.Cmd) error                      { return errNotLinux }
func (tb *Testbed) Do(node string, f func() error) error           { return errNotLinux }
func (tb *Testbed) Listen(node, addr string) (net.Listener, error) { return nil, errNotLinux }
func (tb *Testbed) Dial(node, addr string) (net.Conn, error)       { return nil, errNotLinux }
func (tb *Testbed) Close() error                                   { return nil }

// Command returns a command that fails to start.
func (tb *Testbed) Command(ctx context.Context, node, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Err = errNotLinux // Start fails: nothing runs on the host instead
	return cmd
}

// Leftovers and Sweep have nothing to find here.
func Leftovers() []string { return nil }
func Sweep() error        { return nil }
