// Package browser drives the dashboard's pages in a headless Chromium for
// tests: one tab per browser, every step bounded by testenv's hang guard
// only, and what the page complained about (JavaScript dialogs, uncaught
// exceptions, console errors and warnings, Content-Security-Policy
// violations) recorded for the test to check.
//
// It is a package of its own, beside testenv, so that only the tests that
// drive a browser link chromedp. Like testenv it is imported by tests
// only. The browser is the one testenv.Chrome names.
package browser

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// Tab is a page in a headless Chromium of the test's own. It records the
// JavaScript dialogs the page opens (and dismisses them, so that the page
// goes on) and the errors it reports.
type Tab struct {
	t        testing.TB
	ctx      context.Context
	describe func(*Tab) string
	csp      bool

	mu       sync.Mutex
	dialogs  []string
	problems []string
}

// Option is an option of [New].
type Option interface{ apply(*Tab) }

type option func(*Tab)

func (o option) apply(b *Tab) { o(b) }

// Describe adds what describe says of the page (a status line, say) to
// the failure of a wait that gave up.
func Describe(describe func(*Tab) string) Option {
	return option(func(b *Tab) { b.describe = describe })
}

// WatchCSP records the page's Content-Security-Policy violations, on every
// load, and makes [Tab.NoProblems] fail on one. A script added through the
// DevTools protocol is not subject to the page's CSP, so the listener runs
// before the page's own scripts.
func WatchCSP() Option { return option(func(b *Tab) { b.csp = true }) }

// New starts a browser with one tab of width × height pixels. The browser
// is closed when the test ends.
func New(t testing.TB, width, height int, opts ...Option) *Tab {
	t.Helper()
	chrome := testenv.Chrome(t)
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(width, height))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	ctx, cancel := chromedp.NewContext(actx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		acancel()
		wg.Wait()
	})
	b := &Tab{t: t, ctx: ctx}
	for _, o := range opts {
		o.apply(b)
	}
	// The first call starts the browser: it must have no deadline, which
	// would end the browser with it.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))), "start chromium")
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	console := chromedp.Console(ctx)
	wg.Go(func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, fmt.Sprintf("%s: %q", ev.Type, ev.Message))
			b.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	})
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			// The browser logs every answer that is not 2xx as a network
			// error: the pages read routes that answer 404 until they
			// exist, on purpose.
			if m.Source == "network" {
				continue
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	})
	if b.csp {
		cctx, ccancel := context.WithTimeout(ctx, testenv.HangGuard)
		defer ccancel()
		_, err := chromedp.Call(cctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`})
		require.NoError(t, err)
	}
	return b
}

// Context is the tab's context, for chromedp calls of the test's own; it
// has no deadline.
func (b *Tab) Context() context.Context { return b.ctx }

// Run runs actions, bounded by the hang guard only.
func (b *Tab) Run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.HangGuard)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// Eval evaluates a JavaScript expression in b's page.
func Eval[T any](b *Tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.HangGuard)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

// WaitFor waits until the JavaScript expression is true in the page,
// polling it in the page every 20 ms. It fails the test after
// testenv.HangGuard, with what [Describe] says of the page.
func (b *Tab) WaitFor(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.HangGuard)
	defer cancel()
	if err := b.poll(ctx, expr); err != nil {
		msg := fmt.Sprintf("gave up waiting (hang guard) for %s (%s): %v", what, expr, err)
		if b.describe != nil {
			msg += "; " + b.describe(b)
		}
		b.t.Fatal(msg)
	}
}

// Poll waits until the JavaScript expression is true in the page or ctx
// ends, and says which: for a wait the test bounds itself because it has
// a second course (a click to try again), never for a test's verdict.
func (b *Tab) Poll(ctx context.Context, expr string) error { return b.poll(ctx, expr) }

func (b *Tab) poll(ctx context.Context, expr string) error {
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)))
	return err
}

// NoProblems fails the test if the page opened a dialog, reported an
// error or a warning, or (with [WatchCSP]) had something refused by its
// CSP.
func (b *Tab) NoProblems() {
	b.t.Helper()
	if b.csp {
		require.Empty(b.t, Eval[[]string](b, `window.__csp ?? ['the CSP listener is missing']`), "CSP violations")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(b.t, b.dialogs, "the page opened JavaScript dialogs")
	require.Empty(b.t, b.problems, "the page reported errors")
}

// Problems is what the page reported so far: its errors and warnings.
func (b *Tab) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Screenshot is a PNG of the tab's viewport.
func (b *Tab) Screenshot() []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.HangGuard)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err)
	return png
}

// FullScreenshot is a PNG of the whole page, not only of the viewport.
func (b *Tab) FullScreenshot() []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.HangGuard)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	return png
}
