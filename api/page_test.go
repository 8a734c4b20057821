package api_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/seamlm/seam/internal/testmodels"
)

// chromium finds Debian's chromium (installed by .ci/run), skipping or,
// under SEAM_REQUIRE_REFERENCES, failing when it is absent.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv(testmodels.RequireEnv) != "" {
		t.Fatalf("chromium not found and %s is set (apt-get install -y chromium)", testmodels.RequireEnv)
	}
	t.Skip("chromium not found (apt-get install -y chromium)")
	return ""
}

// The page in a real headless browser: it loads with nothing from outside
// the server, shows the 3 stages up, and streams a chat reply through the
// API. SEAM_SCREENSHOT=path saves a screenshot (docs/img/api-page.png).
func TestPageInBrowser(t *testing.T) {
	exe := chromium(t)
	m := stories(t)
	// Stages that delay what they send by 4 ms make the reply take a couple
	// of seconds, so the screenshot shows a stream in progress.
	_, url := serveSplit(t, m, startStages(t, m, 3, 4*time.Millisecond), 10*time.Second)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 860))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	var mu sync.Mutex
	var requested []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requested = append(requested, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("browser: %v", err)
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(`#stages tbody tr:nth-child(3)`),
		chromedp.WaitVisible(`#wire tbody tr:nth-child(4)`),
		chromedp.SendKeys(`#prompt`, "Tell me a story about a cat."),
		chromedp.Click(`#send`),
		chromedp.WaitVisible(`.msg.assistant:not(:empty)`),
		chromedp.Sleep(1100*time.Millisecond), // a /status poll while the reply streams
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`.msg.assistant[data-done="1"]`)); err != nil {
		t.Fatalf("browser: waiting for the reply to finish: %v", err)
	}
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("browser: %s: %v", sel, err)
		}
		return s
	}
	reply, rate, states, wire := text(`.msg.assistant`), text(`#rate`), text(`#stages tbody`), text(`#wire tbody`)
	t.Logf("reply %q (%s)\nstages:\n%s\nwire:\n%s", reply, rate, states, wire)
	if strings.TrimSpace(reply) == "" || !strings.Contains(rate, "tokens") {
		t.Errorf("reply %q, rate %q", reply, rate)
	}
	if strings.Count(states, "up") != 3 || !strings.Contains(states, "[0, 1)") || !strings.Contains(states, "[3, 5)") {
		t.Errorf("stage table %q: want 3 stages up with their layer ranges", states)
	}
	if !strings.Contains(wire, "f32") || !strings.Contains(wire, "stage 1 → stage 2") {
		t.Errorf("wire table %q", wire)
	}
	mu.Lock()
	for _, u := range requested {
		if !strings.HasPrefix(u, url+"/") {
			t.Errorf("the page requested %s, outside the server: it must work offline", u)
		}
	}
	mu.Unlock()
	if path := os.Getenv("SEAM_SCREENSHOT"); path != "" {
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
