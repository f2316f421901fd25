package ui_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/cockroachdb/pebble/v2/vfs"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	clientevents "k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/access"
	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/record"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/kubevents/kubevents/ui"
)

// updateScreenshot rewrites docs/timeline.png, the README's screenshot,
// docs/family.png, the demo's family in getting-started.md, and
// docs/search.png, the search page's:
//
//	go test ./ui -run 'TestTimelineInBrowser/extensions|TestFamilyOfTheDemo|TestSearchFacets' -update-screenshot
var updateScreenshot = flag.Bool("update-screenshot", false, "write the timeline's screenshot to docs/timeline.png, the demo family's to docs/family.png and the search page's to docs/search.png")

// browserTimeout bounds each browser test.
const browserTimeout = 3 * time.Minute

// browser starts a headless Chromium for the test, or skips the test
// saying why when there is none.
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: the web timeline's browser tests need one (.ci/run installs Debian's chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-gpu", true),
	)
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	t.Cleanup(cancel)
	// Chromium's start is not what these tests test, and on a loaded
	// machine it once failed outright ("Zygote could not fork" its GPU
	// process): a failed start is tried again, twice, each failure logged.
	const startAttempts = 3
	for attempt := 1; ; attempt++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
		err := chromedp.Do(bctx)
		if err == nil {
			t.Cleanup(cancelAlloc)
			t.Cleanup(cancelBrowser)
			return bctx
		}
		cancelBrowser()
		cancelAlloc()
		if attempt == startAttempts || ctx.Err() != nil {
			t.Fatalf("starting %s (attempt %d of %d): %v", path, attempt, startAttempts, err)
		}
		t.Logf("starting %s (attempt %d of %d): %v; trying again", path, attempt, startAttempts, err)
		time.Sleep(time.Second)
	}
}

// TestModelJS runs model.js's unit tests (testdata/model_test.js) in the
// browser and reports each failure.
func TestModelJS(t *testing.T) {
	runJSTests(t, "test.html", "model_test.js")
}

// runJSTests loads testdata's page (which runs the tests of testdata's
// file against the assets) in the browser and reports each failure.
func runJSTests(t *testing.T, page, file string) {
	t.Helper()
	ctx := browser(t)
	mux := http.NewServeMux()
	mux.Handle("/test/", http.StripPrefix("/test/", http.FileServer(http.Dir("testdata"))))
	mux.Handle("/", http.FileServerFS(ui.Assets()))
	hs := httptest.NewServer(mux)
	defer hs.Close()

	type results struct {
		Done    bool
		Results []struct{ Name, Error string }
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/test/"+page)); err != nil {
		t.Fatal(err)
	}
	res, err := chromedp.Run(ctx, chromedp.Poll[results](`window.testResults`, chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		out, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#out').textContent`))
		t.Fatalf("running the JavaScript tests: %v\n%s", err, out)
	}
	// As many tests as the file declares: a file that fails to load
	// or stops early does not pass.
	src, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Count(string(src), "\ntest("); len(res.Results) != want {
		t.Errorf("%d JavaScript tests ran, %s has %d", len(res.Results), file, want)
	}
	for _, r := range res.Results {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Name, r.Error)
		} else {
			t.Logf("ok: %s", r.Name)
		}
	}
}

// eventsd is an eventsd served in-process on loopback with the UI on.
type eventsd struct {
	url string
	hs  *httptest.Server
	cs  kubernetes.Interface
	// store is the server's store.
	store storage.Interface
	// expireWatch, when set, answers the next watch with the ERROR event
	// a server sends for a resourceVersion it no longer has (410).
	expireWatch atomic.Bool
	// lists counts event lists (not watches).
	lists atomic.Int32
	// noFacets, when set, answers facets 404, as a server without them.
	noFacets atomic.Bool
}

// expired is kube-apiserver's watch event for a resourceVersion too old.
const expired = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n"

func (e *eventsd) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.noFacets.Load() && strings.HasSuffix(r.URL.Path, "/facets") {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/events") {
			if r.URL.Query().Get("watch") == "" {
				e.lists.Add(1)
			} else if e.expireWatch.CompareAndSwap(true, false) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, expired)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

const testToken = "ui-test-token"

func startEventsd(t *testing.T, extensions, auth bool) *eventsd {
	t.Helper()
	return startEventsdWith(t, extensions, auth, nil)
}

// startEventsdWith is startEventsd with configure, when not nil, changing
// the server's configuration before it starts.
func startEventsdWith(t *testing.T, extensions, auth bool, configure func(*server.Config)) *eventsd {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Store: store, Logger: log, UI: true, DisableExtensions: !extensions}
	rc := &rest.Config{QPS: -1}
	if auth {
		tokens, err := server.ParseTokens(strings.NewReader(testToken + ",alice,1001\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Authenticator = bearertoken.New(tokens)
		rc.BearerToken = testToken
	}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &eventsd{}
	hs := httptest.NewServer(e.wrap(srv))
	t.Cleanup(func() {
		srv.BeginShutdown()
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Drain(context.Background())
		_ = store.Close()
	})
	rc.Host = hs.URL
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	e.url, e.hs, e.cs, e.store = hs.URL, hs, cs, store
	return e
}

var (
	pod  = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", UID: "uid-web-1"}}
	node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node-1"}}
)

// waitFor polls the API until cond holds for the events of ns.
func waitFor(t *testing.T, cs kubernetes.Interface, what string, cond func([]eventsv1.Event) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return cond(l.Items), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func find(items []eventsv1.Event, reason string) *eventsv1.Event {
	for i := range items {
		if items[i].Reason == reason {
			return &items[i]
		}
	}
	return nil
}

func seriesCount(items []eventsv1.Event, reason string) int32 {
	if ev := find(items, reason); ev != nil && ev.Series != nil {
		return ev.Series.Count
	}
	return 0
}

func seriesState(items []eventsv1.Event, reason string) string {
	if ev := find(items, reason); ev != nil {
		return ev.Annotations[events.SeriesStateAnnotation]
	}
	return ""
}

// recordHistory writes web-1's history with this project's events and
// record recorders (on a fake clock, 40 minutes ago and on) and
// client-go's tools/events recorder (now), and returns the project's
// events recorder, still running, for later occurrences.
func recordHistory(t *testing.T, cs kubernetes.Interface) (*clocktesting.FakeClock, events.EventRecorderLogger) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now().Add(-40 * time.Minute))
	b := events.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, events.WithClock(clk))
	if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	rec := b.NewRecorder(scheme.Scheme, "kubevents-test")

	rec.Eventf(pod, node, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned default/web-1 to node-1")
	waitFor(t, cs, "Scheduled", func(items []eventsv1.Event) bool { return find(items, "Scheduled") != nil })
	clk.Step(5 * time.Minute)
	for range 3 {
		rec.Eventf(pod, nil, corev1.EventTypeWarning, "BackOff", "Restart", "Back-off restarting failed container web")
		clk.Step(time.Minute)
	}
	// Six idle minutes end the series, with its final count. (Not waited
	// for before: the count written while the series is live lags by up
	// to half its age, depending on when the recorder's worker looks
	// between the steps of the clock.)
	clk.Step(7 * time.Minute)
	waitFor(t, cs, "BackOff x3 finished", func(items []eventsv1.Event) bool {
		return seriesCount(items, "BackOff") == 3 && seriesState(items, "BackOff") == "finished"
	})
	clk.Step(5 * time.Minute)
	for range 2 {
		rec.Eventf(pod, nil, corev1.EventTypeWarning, "Unhealthy", "Probe", "Readiness probe failed: HTTP probe failed with statuscode: 503")
		clk.Step(30 * time.Second)
	}
	waitFor(t, cs, "Unhealthy x2 ongoing", func(items []eventsv1.Event) bool {
		return seriesCount(items, "Unhealthy") == 2 && seriesState(items, "Unhealthy") == "ongoing"
	})

	// This project's core/v1 recorder: a legacy event counted twice
	// (deprecatedCount, first and last timestamps; no series).
	rb := record.NewBroadcaster(record.WithClock(clk))
	rb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(rb.Shutdown)
	rrec := rb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
	rrec.Eventf(pod, corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed for volume %q", "config")
	waitFor(t, cs, "FailedMount", func(items []eventsv1.Event) bool { return find(items, "FailedMount") != nil })
	clk.Step(time.Minute)
	rrec.Eventf(pod, corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed for volume %q", "config")
	waitFor(t, cs, "FailedMount x2", func(items []eventsv1.Event) bool {
		ev := find(items, "FailedMount")
		return ev != nil && ev.DeprecatedCount == 2
	})

	// client-go's recorder: a series of two (client-go writes the second
	// occurrence at once, and no state), then an event about node-1 whose
	// related object is web-1.
	cb := clientevents.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	cb.StartRecordingToSink(stop)
	t.Cleanup(func() {
		close(stop)
		cb.Shutdown()
	})
	crec := cb.NewRecorder(scheme.Scheme, "client-go-test")
	for range 2 {
		crec.Eventf(pod, nil, corev1.EventTypeNormal, "Pulling", "Pull", "Pulling image nginx:1.27")
	}
	waitFor(t, cs, "Pulling x2", func(items []eventsv1.Event) bool { return seriesCount(items, "Pulling") == 2 })
	crec.Eventf(node, pod, corev1.EventTypeWarning, "NodeNotReady", "Evict", "Node node-1 is not ready; evicting default/web-1")
	waitFor(t, cs, "NodeNotReady", func(items []eventsv1.Event) bool { return find(items, "NodeNotReady") != nil })
	return clk, rec
}

// lane is a timeline lane as the page draws it.
type lane struct {
	Role, Type, Reason, Counterpart string
	Items                           []item
}

type item struct {
	Kind, Type, State string
	Count, Events     int
	X, W              float64
}

const lanesJS = `[...document.querySelectorAll('#lanes .lane[data-lane]')].map(l => ({
	Role: l.dataset.role,
	Type: l.querySelector('.badge').textContent,
	Reason: l.querySelector('.reason').textContent,
	Counterpart: (l.querySelector('a.counterpart') || {dataset: {}}).dataset.ref || "",
	Items: [...l.querySelectorAll('.item')].map(i => ({Kind: i.dataset.kind, Type: i.dataset.type, State: i.dataset.state || "",
		Count: +i.dataset.count, Events: +i.dataset.events, X: i.getBBox().x, W: i.getBBox().width})),
}))`

func lanes(t *testing.T, ctx context.Context) []lane {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]lane](lanesJS))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func summary(ls []lane) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s %s %s [%s]:", l.Role, l.Type, l.Reason, l.Counterpart)
		for _, it := range l.Items {
			fmt.Fprintf(&b, " %s/%s/x%d/%s", it.Kind, it.Type, it.Count, it.State)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// giveToken waits for the page's token prompt and enters token.
func giveToken(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	waitPage(t, ctx, "the token prompt", `document.querySelector('#token-dialog').open`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#token-input"), token),
		chromedp.Click(chromedp.CSS("#token-ok")),
	); err != nil {
		t.Fatal(err)
	}
}

// waitPage waits until the JavaScript condition holds on the page.
func waitPage(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#status').textContent + ' | ' + document.querySelector('#summary').textContent + ' | live: ' + document.querySelector('#live').textContent`))
		t.Fatalf("waiting for %s on the page: %v (page says: %s)\nlanes:\n%s", what, err, status, summary(lanes(t, ctx)))
	}
}

// TestTimelineInBrowser loads web-1's timeline from an eventsd with the
// events of this project's recorders and client-go's, with extensions (and a token the page asks
// for) and without them (the page joins on the client), and checks the
// marks and bars, their order, the related link, and live updates
// (through a reconnect).
func TestTimelineInBrowser(t *testing.T) {
	for _, c := range []struct {
		name             string
		extensions, auth bool
		mode             string
	}{
		{"extensions", true, true, "extensions"},
		{"no-extensions", false, false, "client-join"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := browser(t)
			srv := startEventsd(t, c.extensions, c.auth)
			clk, rec := recordHistory(t, srv.cs)

			if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/")); err != nil {
				t.Fatal(err)
			}
			if c.auth {
				// The API answers 401: the page asks for a token.
				giveToken(t, ctx, testToken)
			}
			// The overview: web-1 has 3 + 2 + 2 Warning occurrences in
			// the last hour, node-1 one.
			waitPage(t, ctx, "the overview", `document.querySelector('#overview').dataset.status === 'ready'`)
			top, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#top-objects tbody tr')].map(r => [...r.cells].slice(0, 3).map(c => c.textContent).join(' '))`))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"default Pod/web-1 7", " Node/node-1 1"}; !slices.Equal(top, want) {
				t.Errorf("overview's top objects %q, want %q", top, want)
			}
			namespaces, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#namespaces tbody tr')].map(r => [...r.cells].map(c => c.textContent).join(' '))`))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"default 6 8"}; !slices.Equal(namespaces, want) {
				t.Errorf("overview's namespaces %q, want %q", namespaces, want)
			}
			// The headings say what is counted: event objects (6, a
			// series once) and Warning occurrences (8, a series its count).
			headings, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#overview th, #overview h2')].map(h => h.textContent.trim())`))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Events stored", "Warning occurrences, last hour", "Most Warning occurrences in the last hour in all namespaces", "Warning occurrences"} {
				if !slices.Contains(headings, want) {
					t.Errorf("overview headings %q lack %q", headings, want)
				}
			}
			// "Forget token" shows only while a token is kept.
			forget := `getComputedStyle(document.querySelector('#forget-token')).display !== 'none'`
			if shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](forget)); err != nil || shown != c.auth {
				t.Errorf("Forget token shown: %v (%v), want %v (a token is kept: %v)", shown, err, c.auth, c.auth)
			}
			// The search box takes namespace/kind/name, the kind as
			// kubectl takes it.
			if err := chromedp.Do(ctx,
				chromedp.SendKeys(chromedp.CSS("#search"), "default/pod/web-1"),
				chromedp.Click(chromedp.CSS(`#search-form button[type="submit"]`)),
			); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "the timeline", `document.querySelector('#timeline').dataset.status === 'ready' && document.querySelectorAll('#lanes .lane[data-lane]').length === 6`)

			url, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.search`))
			if err != nil {
				t.Fatal(err)
			}
			mode, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#timeline').dataset.mode`))
			if err != nil {
				t.Fatal(err)
			}
			if url != "?object=default%2FPod%2Fweb-1" {
				t.Errorf("URL query %q: want the resolved object default/Pod/web-1 (pod resolved through discovery)", url)
			}
			if mode != c.mode {
				t.Errorf("mode %q, want %q", mode, c.mode)
			}

			got := lanes(t, ctx)
			want := "" +
				"regarding Normal Scheduled [Node/node-1]: mark/Normal/x1/\n" +
				"regarding Warning BackOff []: bar/Warning/x3/finished\n" +
				"regarding Warning Unhealthy []: bar/Warning/x2/ongoing\n" +
				"regarding Warning FailedMount []: bar/Warning/x2/\n" + // a legacy count: no series state
				"regarding Normal Pulling []: bar/Normal/x2/unknown\n" +
				"related Warning NodeNotReady [Node/node-1]: mark/Warning/x1/\n"
			if s := summary(got); s != want {
				t.Fatalf("lanes:\n%s\nwant:\n%s", s, want)
			}
			// In time order along the axis, bars spanning their series.
			for i := 1; i < len(got); i++ {
				if got[i].Items[0].X < got[i-1].Items[0].X {
					t.Errorf("lane %d (%s) starts at x=%.0f, before lane %d (%s) at x=%.0f", i, got[i].Reason, got[i].Items[0].X, i-1, got[i-1].Reason, got[i-1].Items[0].X)
				}
			}
			// BackOff spans 2 minutes of a 1 hour window of at least
			// 200 px.
			if w := got[1].Items[0].W; w < 6 {
				t.Errorf("BackOff bar is %.1f px wide, want its 2 minutes", w)
			}

			// The related object's link opens its timeline.
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#lanes a.counterpart[data-ref="Node/node-1"]`))); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "node-1's timeline", `location.search === '?object=Node%2Fnode-1' && document.querySelector('#timeline').dataset.status === 'ready' && document.querySelectorAll('#lanes .lane[data-lane]').length === 2`)
			nodeLanes := summary(lanes(t, ctx))
			wantNode := "related Normal Scheduled [default/Pod/web-1]: mark/Normal/x1/\n" +
				"regarding Warning NodeNotReady [default/Pod/web-1]: mark/Warning/x1/\n"
			if nodeLanes != wantNode {
				t.Errorf("node-1's lanes:\n%s\nwant:\n%s", nodeLanes, wantNode)
			}
			// Back to web-1, by the browser's history.
			if err := chromedp.Do(ctx, chromedp.NavigateBack()); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "web-1's timeline again", `location.search === '?object=default%2FPod%2Fweb-1' && document.querySelector('#timeline').dataset.live === 'watching' && document.querySelectorAll('#lanes .lane[data-lane]').length === 6`)

			// Live: a new event, and a series' count changing.
			rec.Eventf(pod, nil, corev1.EventTypeNormal, "Killing", "Kill", "Stopping container web")
			clk.Step(time.Second)
			waitPage(t, ctx, "the new Killing event", `[...document.querySelectorAll('#lanes .reason')].some(r => r.textContent === 'Killing')`)
			patchCount(t, srv.cs, "Unhealthy", 7)
			waitPage(t, ctx, "Unhealthy's count 7", `document.querySelector('#lanes .item.bar[data-reason="Unhealthy"]').dataset.count === '7'`)

			// A broken connection: the page resumes from the last
			// resourceVersion it saw and shows the next change once.
			srv.hs.CloseClientConnections()
			patchCount(t, srv.cs, "Unhealthy", 9)
			waitPage(t, ctx, "Unhealthy's count 9 after a reconnect", `document.querySelector('#lanes .item.bar[data-reason="Unhealthy"]').dataset.count === '9'`)
			shown, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('#lanes .item')].reduce((n, i) => n + +i.dataset.events, 0)`))
			if err != nil {
				t.Fatal(err)
			}
			if shown != 7 {
				t.Errorf("%d events drawn after the reconnect, want 7 (each once):\n%s", shown, summary(lanes(t, ctx)))
			}

			// The server no longer has the page's resourceVersion (410):
			// the page lists again and goes on from there.
			lists := srv.lists.Load()
			srv.expireWatch.Store(true)
			srv.hs.CloseClientConnections()
			patchCount(t, srv.cs, "Unhealthy", 11)
			waitPage(t, ctx, "Unhealthy's count 11 after a 410", `document.querySelector('#lanes .item.bar[data-reason="Unhealthy"]').dataset.count === '11'`)
			if srv.expireWatch.Load() || srv.lists.Load() == lists {
				t.Errorf("after the 410: watch answered %v, lists %d then %d: want a list again", !srv.expireWatch.Load(), lists, srv.lists.Load())
			}
			if shown, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('#lanes .item')].reduce((n, i) => n + +i.dataset.events, 0)`)); err != nil || shown != 7 {
				t.Errorf("%d events drawn after the relist (%v), want 7", shown, err)
			}

			// Zoom and the warnings-only toggle, kept in the URL. The
			// project's events are some 20 minutes old, client-go's new.
			laneCount := `document.querySelectorAll('#lanes .lane[data-lane]').length`
			for _, z := range []struct {
				button, query, cond string
			}{
				{`#zoom button[data-zoom="all"]`, "zoom=all", laneCount + ` === 7`},
				{`#zoom button[data-zoom="15m"]`, "zoom=15m", laneCount + ` === 2`},
				{`#zoom button[data-zoom="1h"]`, "", laneCount + ` === 7`},
				{`#warnings`, "warnings=1", `[...document.querySelectorAll('#lanes .lane[data-lane] .reason')].map(r => r.textContent).join() === 'BackOff,Unhealthy,FailedMount,NodeNotReady'`},
				{`#warnings`, "", laneCount + ` === 7`},
			} {
				if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(z.button))); err != nil {
					t.Fatal(err)
				}
				inURL := `!location.search.includes('zoom=') && !location.search.includes('warnings=')`
				if z.query != "" {
					inURL = `location.search.includes('` + z.query + `')`
				}
				waitPage(t, ctx, "after clicking "+z.button, inURL+` && `+z.cond)
			}

			// Keyboard: from the first mark down to BackOff's bar, Enter
			// selects it.
			if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(`#lanes .item[data-reason="Scheduled"]`)), chromedp.KeyEvent(kb.ArrowDown)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "the focus on BackOff", `document.activeElement.dataset.reason === 'BackOff'`)
			if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "BackOff selected by keyboard", `document.querySelector('#lanes .item.selected[data-reason="BackOff"]') !== null && location.search.includes('event=')`)
			if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "the selection cleared", `!location.search.includes('event=')`)

			// Clicking a bar shows the full event, and keeps it in the URL.
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#lanes .item.bar[data-reason="BackOff"]`))); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, "BackOff's details", `document.querySelector('#details article') !== null && document.querySelector('#details').textContent.includes('Back-off restarting failed container web') && location.search.includes('event=')`)

			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "timeline.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
			if *updateScreenshot && c.name == "extensions" {
				if err := os.WriteFile(filepath.Join("..", "docs", "timeline.png"), png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// patchCount sets the series count of the event with reason, as a
// recorder's count patch does.
func patchCount(t *testing.T, cs kubernetes.Interface, reason string, count int32) {
	t.Helper()
	l, err := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("finding the %s event: %v (%d found)", reason, err, len(l.Items))
	}
	body, _ := json.Marshal(map[string]any{"series": map[string]any{"count": count, "lastObservedTime": l.Items[0].Series.LastObservedTime}})
	if _, err := cs.EventsV1().Events("default").Patch(context.Background(), l.Items[0].Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestTimelineThousandsOfEvents draws an object with 3,000 events: every
// one is counted in a mark, the marks are bounded by the width, and the
// page stays responsive.
func TestTimelineThousandsOfEvents(t *testing.T) {
	const n = 3000
	ctx := browser(t)
	srv := startEventsd(t, true, false)
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				typ, reason := corev1.EventTypeNormal, "Pulled"
				if i%10 == 0 {
					typ, reason = corev1.EventTypeWarning, "Failed"
				}
				ev := &eventsv1.Event{
					ObjectMeta:          metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("busy.%05d", i)},
					EventTime:           metav1.NewMicroTime(now.Add(-time.Duration(n-i) * time.Second)),
					Type:                typ,
					Reason:              reason,
					Action:              "Pull",
					Note:                fmt.Sprintf("occurrence %d", i),
					ReportingController: "load", ReportingInstance: "load-1",
					Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "busy", UID: "uid-busy"},
				}
				if _, err := srv.cs.EventsV1().Events("default").Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?object=default/Pod/busy")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the timeline", `document.querySelector('#timeline').dataset.status === 'ready' && document.querySelector('#timeline').dataset.events === '3000'`)
	loaded := time.Since(start)
	got := lanes(t, ctx)
	var events, items int
	for _, l := range got {
		for _, it := range l.Items {
			events += it.Events
			items++
		}
	}
	if events != n {
		t.Errorf("%d events drawn, want %d:\n%s", events, n, summary(got))
	}
	if len(got) != 2 {
		t.Errorf("%d lanes, want Pulled and Failed:\n%s", len(got), summary(got))
	}
	// Merged by the pixel: far fewer elements than events.
	if items > 600 {
		t.Errorf("%d items drawn for %d events: not merged", items, n)
	}
	// Responsive: a zoom change redraws within a generous bound.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#zoom button[data-zoom="15m"]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the 15 min zoom", `location.search.includes('zoom=15m') && document.querySelector('#zoom button[data-zoom="15m"]').getAttribute('aria-pressed') === 'true'`)
	renderMs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`+document.querySelector('#timeline').dataset.renderMs`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3000 events: loaded and drawn in %v, %d items; a redraw at 15 min took %d ms in the page", loaded, items, renderMs)
	if loaded > time.Minute || renderMs > 5000 {
		t.Errorf("3000 events: loaded in %v, redraw %d ms; want well under a minute and 5 s", loaded, renderMs)
	}
}

// TestTimelineNamespaceOnly: a user who may read events only in one
// namespace (ABAC), and not discovery, still gets an object's timeline
// there: the page guesses the kind, and after the 403 on the list across
// namespaces lists and watches in the object's namespace. Elsewhere the
// page shows the API's refusal.
func TestTimelineNamespaceOnly(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	tokenFile, policyFile := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "policy.jsonl")
	if err := os.WriteFile(tokenFile, []byte("admin-token,admin,1,system:masters\nbob-token,bob,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bob", "namespace": "default", "apiGroup": "*", "resource": "events", "readonly": true}}` + "\n"
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := access.Build(access.Options{TokenAuthFile: tokenFile, AuthorizationModes: []string{access.ModeABAC}, PolicyFile: policyFile})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: store, Logger: log, UI: true, Authenticator: b.Authenticator, Authorizer: b.Authorizer})
	if err != nil {
		t.Fatal(err)
	}
	e := &eventsd{}
	hs := httptest.NewServer(e.wrap(srv))
	t.Cleanup(func() {
		srv.BeginShutdown()
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Drain(context.Background())
		_ = store.Close()
	})
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, BearerToken: "admin-token", QPS: -1})
	create := func(name, typ, reason string, at time.Time) {
		t.Helper()
		_, err := cs.EventsV1().Events("default").Create(context.Background(), &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name}, EventTime: metav1.NewMicroTime(at),
			Type: typ, Reason: reason, Action: "Test", Note: reason + " for the test",
			ReportingController: "test", ReportingInstance: "test-1",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	create("web-1.a", corev1.EventTypeNormal, "Scheduled", now.Add(-10*time.Minute))
	create("web-1.b", corev1.EventTypeWarning, "BackOff", now.Add(-5*time.Minute))

	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/ui/?object=default/pod/web-1")); err != nil {
		t.Fatal(err)
	}
	giveToken(t, ctx, "bob-token")
	waitPage(t, ctx, "the timeline", `document.querySelector('#timeline').dataset.live === 'watching' && document.querySelector('#timeline').dataset.status === 'ready' && document.querySelectorAll('#lanes .lane[data-lane]').length === 2 && location.search === '?object=default%2FPod%2Fweb-1'`)
	if got, want := summary(lanes(t, ctx)), "regarding Normal Scheduled []: mark/Normal/x1/\nregarding Warning BackOff []: mark/Warning/x1/\n"; got != want {
		t.Errorf("lanes:\n%s\nwant:\n%s", got, want)
	}
	create("web-1.c", corev1.EventTypeNormal, "Killing", now)
	waitPage(t, ctx, "the new Killing event", `[...document.querySelectorAll('#lanes .reason')].some(r => r.textContent === 'Killing')`)

	// Where bob may read nothing, the page says so, and stays so (the
	// periodic redraw does not hide the error).
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/ui/?object=kube-system/pod/coredns")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the refusal", `document.querySelector('#timeline').dataset.status === 'error' && document.querySelector('#status').textContent.includes('User "bob" cannot list resource "events"')`)

	// "Forget token" shows while the tab keeps bob's token; once clicked
	// it hides, and the page asks for a token again.
	forget := `getComputedStyle(document.querySelector('#forget-token')).display`
	waitPage(t, ctx, "Forget token shown", forget+` !== 'none'`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#forget-token"))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "Forget token hidden", forget+` === 'none' && document.querySelector('#status').textContent === 'Token forgotten for this tab.'`)
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/ui/?object=default/pod/web-1")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the token prompt again", `document.querySelector('#token-dialog').open`)
}

// TestTimelineEscapedNames opens the timelines of objects whose names
// hold a field selector's separators. Their names are escaped in the
// involves.* selector as apimachinery escapes values: "a=b" opens (not
// the server's 400), and "victim,type=Warning" shows its own event, not
// the Warning events of the object named "victim".
func TestTimelineEscapedNames(t *testing.T) {
	ctx := browser(t)
	srv := startEventsd(t, true, false)
	now := time.Now()
	create := func(name, object, typ, reason string) {
		t.Helper()
		_, err := srv.cs.EventsV1().Events("default").Create(context.Background(), &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name}, EventTime: metav1.NewMicroTime(now.Add(-time.Minute)),
			Type: typ, Reason: reason, Action: "Test", Note: reason + " about " + object,
			ReportingController: "test", ReportingInstance: "test-1",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: object},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	create("ab.1", "a=b", corev1.EventTypeNormal, "Pulled")
	create("victim.1", "victim", corev1.EventTypeWarning, "Secret")
	create("comma.1", "victim,type=Warning", corev1.EventTypeNormal, "Started")
	create("slash.1", `back\slash`, corev1.EventTypeNormal, "Created")

	for _, c := range []struct{ name, lanes string }{
		{"a=b", "regarding Normal Pulled []: mark/Normal/x1/\n"},
		{"victim,type=Warning", "regarding Normal Started []: mark/Normal/x1/\n"},
		{`back\slash`, "regarding Normal Created []: mark/Normal/x1/\n"},
		{"victim", "regarding Warning Secret []: mark/Warning/x1/\n"},
	} {
		object := "default/Pod/" + c.name
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?"+url.Values{"object": {object}}.Encode())); err != nil {
			t.Fatal(err)
		}
		waitPage(t, ctx, c.name+"'s timeline", `['ready', 'error'].includes(document.querySelector('#timeline').dataset.status) && document.querySelector('#object-title').textContent === `+jsString(object))
		status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#timeline').dataset.status + ' ' + document.querySelector('#timeline').dataset.mode + ' ' + document.querySelector('#status').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		if status != "ready extensions " {
			t.Errorf("%q: timeline status, mode and message %q, want ready with extensions and no message", c.name, status)
		}
		if got := summary(lanes(t, ctx)); got != c.lanes {
			t.Errorf("%q's lanes:\n%s\nwant:\n%s", c.name, got, c.lanes)
		}
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestSeriesLabelsStayInside: a series' bar and its label (×N state) are
// drawn whole within the track at every zoom, also for a recent series
// that is a sliver at the right edge at wide zooms, and the label never
// over its own bar unless it is written inside it.
func TestSeriesLabelsStayInside(t *testing.T) {
	ctx := browser(t)
	srv := startEventsd(t, true, false)
	now := time.Now()
	create := func(name, reason string, first, last time.Time, count int32, state string) {
		t.Helper()
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{events.SeriesStateAnnotation: state}},
			EventTime:  metav1.NewMicroTime(first),
			Type:       corev1.EventTypeWarning, Reason: reason, Action: "Test", Note: reason,
			ReportingController: "test", ReportingInstance: "test-1",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"},
			Series:    &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(last)},
		}
		if _, err := srv.cs.EventsV1().Events("default").Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A recent series, ending now; one from the start of the window to
	// its end; a short one at the left edge of "all".
	create("recent", "BackOff", now.Add(-90*time.Second), now, 12345, "ongoing")
	create("long", "Unhealthy", now.Add(-23*time.Hour), now.Add(-time.Minute), 4, "ongoing")
	create("old", "Pulling", now.Add(-23*time.Hour-50*time.Minute), now.Add(-23*time.Hour-49*time.Minute), 99999, "finished")

	const labelsJS = `[...document.querySelectorAll('#lanes .item.bar')].map(g => {
		const text = g.querySelector('text.bar-label'), bar = g.querySelector('rect').getBBox(), b = text.getBBox();
		return {Reason: g.dataset.reason, Text: text.textContent, Inside: text.classList.contains('inside'),
			X: b.x, W: b.width, BarX: bar.x, BarW: bar.width, Track: +g.ownerSVGElement.getAttribute('width')};
	})`
	type label struct {
		Reason, Text            string
		Inside                  bool
		X, W, BarX, BarW, Track float64
	}
	for _, zoom := range []string{"15m", "1h", "6h", "24h", "all"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?object=default/Pod/web-1&zoom="+zoom)); err != nil {
			t.Fatal(err)
		}
		waitPage(t, ctx, "the timeline at "+zoom, `document.querySelector('#timeline').dataset.status === 'ready' && document.querySelectorAll('#lanes .item.bar').length > 0`)
		labels, err := chromedp.Run(ctx, chromedp.Evaluate[[]label](labelsJS))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range labels {
			if l.BarX < 0 || l.BarX+l.BarW > l.Track+0.5 {
				t.Errorf("zoom %s: %s's bar spans %.1f to %.1f, outside its track of %.0f px", zoom, l.Reason, l.BarX, l.BarX+l.BarW, l.Track)
			}
			if l.X < 0 || l.X+l.W > l.Track+0.5 {
				t.Errorf("zoom %s: %s's label %q spans %.1f to %.1f, outside its track of %.0f px", zoom, l.Reason, l.Text, l.X, l.X+l.W, l.Track)
			}
			if overlap := min(l.X+l.W, l.BarX+l.BarW) - max(l.X, l.BarX); l.Inside != (overlap > 0) || l.Inside && (l.X < l.BarX || l.X+l.W > l.BarX+l.BarW) {
				t.Errorf("zoom %s: %s's label %q (inside: %v) at %.1f–%.1f, its bar at %.1f–%.1f: want it inside the bar or clear of it",
					zoom, l.Reason, l.Text, l.Inside, l.X, l.X+l.W, l.BarX, l.BarX+l.BarW)
			}
		}
		if zoom == "24h" && len(labels) != 3 {
			t.Errorf("zoom 24h: %d series drawn as bars, want 3", len(labels))
		}
	}
}
