package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/chat"
	"github.com/seamlm/seam/internal/netns"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tokenizer"
)

// The API's client tests (the official openai npm client) against a head
// in one network namespace whose pool members run in two others, every
// connection over TLS: stories260K planned into the pool, greedy
// completions equal to seam run's whole-model text.
func TestAPIOnTestbed(t *testing.T) {
	if err := netns.Available(); err != nil {
		if os.Getenv("SEAM_REQUIRE_NETNS") == "1" || os.Getenv("CI") != "" {
			t.Fatalf("network namespace testbed unavailable: %v", err)
		}
		t.Skipf("network namespace testbed unavailable: %v", err)
	}
	dir := testmodels.Dir(t)
	testmodels.ReferenceDir(t)
	modelPath, tokPath := filepath.Join(dir, testmodels.Stories260K), filepath.Join(dir, testmodels.Tok512)
	tb, err := netns.New([]string{"h", "a", "b"}, []netns.Link{{A: "h", B: "a", Mbps: 1000}, {A: "h", B: "b", Mbps: 1000}, {A: "a", B: "b", Mbps: 100}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("testbed cleanup: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cache := t.TempDir() // the head's plan record
	start := func(node, ready string, args ...string) *syncBuffer {
		cmd := tb.Command(ctx, node, os.Args[0], append(args, keyFlags(t)...)...)
		cmd.Env = append(os.Environ(), "SEAM_TEST_MAIN=1", "XDG_CACHE_HOME="+cache)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		if err := tb.Start(cmd); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, ready) {
			t.Fatalf("%s in %s: %q %v; stderr: %s", args[0], node, line, err, stderr.String())
		}
		go io.Copy(io.Discard, out)
		return stderr
	}
	var pool []string
	for _, n := range []string{"a", "b"} {
		addr := tb.Host(n) + ":7070"
		start(n, "pool member", "serve", "--model", modelPath, "--listen", addr, "--name", n, "--memory", "69MiB")
		pool = append(pool, addr)
	}
	apiAddr := tb.Host("h") + ":8080"
	apiLog := start("h", "serving", "-v", "api", "--model", modelPath, "--tokenizer", tokPath, "--listen", apiAddr, "--pool", strings.Join(pool, ","),
		"--sessions", "8", "--poll", "100ms")
	// The stages are in the other namespaces: the plan uses both members.
	planned := regexp.MustCompile(`msg="pool planned" .*chain=(\S+) ranges="([^"]+)"`).FindStringSubmatch(apiLog.String())
	if planned == nil {
		t.Fatalf("the api logged no plan:\n%s", apiLog)
	}
	if chain := strings.Split(planned[1], ","); len(chain) != 2 || !slices.Contains(chain, pool[0]) || !slices.Contains(chain, pool[1]) {
		t.Fatalf("the api planned the chain %s (%s); want both members, in a and b", planned[1], planned[2])
	}
	t.Logf("planned chain %s, ranges %s", planned[1], planned[2])

	// The client runs here, in the root namespace, through a proxy into h.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := tb.Dial("h", apiAddr)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	url := "http://" + ln.Addr().String()
	out := testmodels.RunNode(t, 2*time.Minute, nil, "openai-api.mjs", url, "stories260K")
	var r openaiRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	tok, err := tokenizer.LoadLlama2c(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "Once upon a time"
	promptTokens := len(tok.Encode(prompt, tok.AddBOS(), false))
	rendered := chat.Fallback([]chat.Message{{Role: "system", Content: "You tell stories."}, {Role: "user", Content: "Tell me about a dog."}},
		chat.Options{AddGenerationPrompt: true})
	chatPromptTokens := len(tok.EncodeWith(rendered.Text, tokenizer.EncodeOptions{BOS: tok.AddBOS(), Literal: rendered.Literal}))
	run, err := seam(t, "run", "--model", modelPath, "--tokenizer", tokPath, "-n", fmt.Sprint(promptTokens+60-1), "--temperature", "0", prompt)
	if err != nil {
		t.Fatal(err)
	}
	checkOpenAIRun(t, &r, strings.TrimSuffix(strings.TrimPrefix(run, prompt), "\n"), promptTokens, chatPromptTokens)
}
