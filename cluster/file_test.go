package cluster

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "8GiB": 8 << 30, "1.5 MiB": 3 << 19, "2GB": 2e9, "10B": 10} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1GiB", "0", "lots", "1e30TiB", "NaN"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseFile(t *testing.T) {
	const ok = `model = "m.seam"
key = "/abs/head.key"
trust = "trust"
[[host]]
name = "a"
addr = "198.18.0.1:7070"
`
	f, err := ParseFile([]byte(ok), "/etc/seam/cluster.toml")
	if err != nil {
		t.Fatal(err)
	}
	if f.Model != filepath.Join("/etc/seam", "m.seam") || f.Key != "/abs/head.key" || f.Trust != "/etc/seam/trust" {
		t.Fatalf("paths: %q %q %q", f.Model, f.Key, f.Trust)
	}
	if err := f.Offline(); err == nil || !strings.Contains(err.Error(), "host a (memory") || !strings.Contains(err.Error(), "link head-a") {
		t.Fatalf("Offline: %v", err)
	}
	for _, bad := range []struct{ text, want string }{
		{ok + "lisen = \"x\"\n", "unknown keys host.lisen"},
		{"lisen = 1\n" + ok, "unknown keys lisen"},
		{"model = 3\n", "line 1"},
		{ok + "[[host]]\nname = \"a\"\n", `name "a" is used twice`},
		{ok + "[[host]]\nname = \"head\"\n", "want a name other than"},
		{strings.Replace(ok, `trust = "trust"`, "insecure = true", 1), "insecure = true with a key"},
		{ok + "[[link]]\na = \"a\"\nb = \"zz\"\nmbps = 1\n", `joins "a" and "zz"`},
		{ok + "[[link]]\na = \"a\"\nb = \"head\"\nmbps = -1\n", "bandwidth -1"},
		{"max_kl = -1\n" + ok, "max_kl -1"},
		{strings.Replace(ok, "[[host]]", "[[host]]\nmemory = \"lots\"", 1), "memory: size"},
	} {
		if _, err := ParseFile([]byte(bad.text), "c.toml"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err %v, want %q", bad.text, err, bad.want)
		}
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte("model = \"m\"\n[[host]]\nname = \"a\"\nmemory = \"1GiB\"\n[[link]]\na = \"a\"\nb = \"head\"\nmbps = 10\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := ParseFile(data, "fuzz.toml")
		if err != nil {
			return
		}
		if cf.Offline() == nil {
			if _, err := cf.Request(Shape{}); err != nil {
				t.Fatalf("offline file gave no request: %v", err)
			}
		}
	})
}
