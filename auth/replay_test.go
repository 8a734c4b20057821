package auth

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// recorder forwards one connection to target and keeps a copy of every
// byte the client sent, as an attacker on the path would.
type recorder struct {
	mu   sync.Mutex
	sent bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent.Write(p)
}

func (r *recorder) proxy(t *testing.T, ln net.Listener, target string) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	s, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		t.Errorf("proxy dial: %v", err)
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(s, io.TeeReader(c, r)); s.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(c, s); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
	c.Close()
	s.Close()
}

// A recorded session replayed byte for byte to the same server is refused:
// the server's fresh handshake randomness makes the recorded client
// signature and Finished fail, and not one application byte comes through.
func TestReplayedSessionIsRefused(t *testing.T) {
	ks, kc := mustKey(t), mustKey(t)
	server, client := newNode(t, ks, kc), newNode(t, kc, ks)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	type outcome struct {
		got []byte
		err error
	}
	outcomes := make(chan outcome, 2)
	go func() {
		for range 2 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				conn, _, err := server.cfg.Server(context.Background(), c)
				if err != nil {
					outcomes <- outcome{err: err}
					return
				}
				defer conn.Close()
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				got, err := io.ReadAll(conn)
				outcomes <- outcome{got, err}
			}()
		}
	}()

	// The real session, through the recording proxy.
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	rec := &recorder{}
	proxied := make(chan struct{})
	go func() { rec.proxy(t, pl, ln.Addr().String()); close(proxied) }()
	raw, err := net.Dial("tcp", pl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := client.cfg.Client(context.Background(), raw, pl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("prefill: transfer 100 coins to mallory")
	if _, err := conn.Write(secret); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	first := <-outcomes
	if first.err != nil || !bytes.Equal(first.got, secret) {
		t.Fatalf("the real session: got %q, %v", first.got, first.err)
	}
	<-proxied
	recorded := rec.sent.Bytes()
	if bytes.Contains(recorded, secret) {
		t.Fatal("the recorded bytes contain the plaintext: not encrypted")
	}

	// The replay: the same bytes, to the same server, on a new connection.
	r, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() { r.Write(recorded) }()
	second := <-outcomes
	if second.err == nil {
		t.Fatalf("the replayed session was accepted and delivered %q", second.got)
	}
	if len(second.got) != 0 {
		t.Fatalf("the replay delivered %d application bytes", len(second.got))
	}
	t.Logf("replay of %d recorded bytes refused: %v", len(recorded), second.err)
}
