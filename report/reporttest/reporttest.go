// Package reporttest opens a report in headless Chromium for a test: no
// console errors, a screenshot that is not blank.
package reporttest

import (
	"bytes"
	"context"
	"image"
	pngpkg "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Screenshot opens the page in headless Chromium, in a subtest that is
// skipped, saying so, when there is no browser (a failure with
// TAILGATE_REQUIRE_CHROMIUM=1), and checks it loads with no console error
// and draws a page that is neither blank nor an error page: enough ink,
// and some of it in colour (the plots' lines). TAILGATE_SCREENSHOTS=DIR
// keeps the screenshots.
func Screenshot(t *testing.T, page, png string) {
	t.Helper()
	t.Run("chromium "+filepath.Base(page), func(t *testing.T) { screenshot(t, page, png) })
}

// browser is the headless Chromium to use; without one the test is
// skipped (a failure with TAILGATE_REQUIRE_CHROMIUM=1).
func browser(t *testing.T) string {
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	if os.Getenv("TAILGATE_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH and TAILGATE_REQUIRE_CHROMIUM=1")
	}
	t.Skip("no chromium on PATH: the page is not opened in a browser (apt-get install chromium)")
	return ""
}

// DOM opens the page in headless Chromium, 1280 px wide, with its scripts
// run and the network off, and returns the document as they left it, in
// a subtest (skipped without a browser) that fails on a console error.
func DOM(t *testing.T, page string, check func(t *testing.T, dom string)) {
	t.Helper()
	t.Run("dom "+filepath.Base(page), func(t *testing.T) {
		bin := browser(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+t.TempDir(),
			"--enable-logging=stderr", "--v=0", "--window-size=1280,4000", "--proxy-server=127.0.0.1:9",
			"--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000", "--dump-dom", "file://"+page)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, "CONSOLE") || strings.Contains(l, "Content Security Policy") || strings.Contains(l, "Failed to load") {
				t.Errorf("console: %s", l)
			}
		}
		check(t, stdout.String())
	})
}

func screenshot(t *testing.T, page, png string) {
	bin := browser(t)
	if keep := os.Getenv("TAILGATE_SCREENSHOTS"); keep != "" {
		png = filepath.Join(keep, filepath.Base(png))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--window-size=1280,4000",
		"--screenshot=" + png, "file://" + page}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "CONSOLE") || strings.Contains(l, "Content Security Policy") || strings.Contains(l, "Failed to load") {
			t.Errorf("console: %s", l)
		}
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, stderr.String())
	}
	defer f.Close()
	img, err := pngpkg.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	ink, colour := inked(img)
	if ink < 0.02 || colour < 0.0005 {
		t.Errorf("screenshot %s looks blank: %.2f%% of pixels drawn, %.3f%% in colour", png, 100*ink, 100*colour)
	} else {
		t.Logf("screenshot %s: %.1f%% of pixels drawn, %.2f%% in colour", png, 100*ink, 100*colour)
	}
}

// inked is the share of pixels that are not near-white, and of those
// that are coloured (channels far apart: not text, not grid).
func inked(img image.Image) (ink, colour float64) {
	b := img.Bounds()
	n, in, col := 0, 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			n++
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				in++
			}
			hi, lo := max(r, g, bl), min(r, g, bl)
			if hi-lo > 0x4000 {
				col++
			}
		}
	}
	return float64(in) / float64(n), float64(col) / float64(n)
}
