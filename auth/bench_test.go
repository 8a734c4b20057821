package auth

import (
	"context"
	"crypto/ed25519"
	"io"
	"net"
	"testing"
)

// BenchmarkRoundTrip times one decode step's traffic on loopback: an f32
// activation frame of a dim-768 model (52 + 3072 bytes) one way, a greedy
// result frame (52 + 4 bytes) back, in plaintext and over TLS 1.3.
func BenchmarkRoundTrip(b *testing.B) {
	k := mustKeyB(b)
	tr, _ := NewTrust(Public(k))
	for _, mode := range []struct {
		name string
		cfg  func() *Config
	}{
		{"plain", func() *Config { return &Config{Insecure: true} }},
		{"tls", func() *Config { return &Config{Key: k, Trust: tr} }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				raw, err := ln.Accept()
				if err != nil {
					return
				}
				c, _, err := mode.cfg().Server(context.Background(), raw)
				if err != nil {
					return
				}
				defer c.Close()
				req, resp := make([]byte, 52+3072), make([]byte, 56)
				for {
					if _, err := io.ReadFull(c, req); err != nil {
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
			raw, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			c, _, err := mode.cfg().Client(context.Background(), raw, "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req, resp := make([]byte, 52+3072), make([]byte, 56)
			copy(req, plainMagic) // a plaintext peer must start like a frame
			b.SetBytes(int64(len(req) + len(resp)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustKeyB(b *testing.B) ed25519.PrivateKey {
	k, err := GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	return k
}
