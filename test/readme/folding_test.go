package readme

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// foldingDoc is the page whose commands TestFoldingPage runs.
const foldingDoc = "docs/folding-and-rate-limits.md"

// TestFoldingPage runs docs/folding-and-rate-limits.md's commands as a
// reader would, against the eventsd its blocks start, and checks what the
// page says they show: three naive creates of one event folded into one
// event of count 3 (kubectl printing the fold's Warning for the second
// and third), and a flood of creates about one object answered 429 once
// the SourceAndObject bucket is empty.
func TestFoldingPage(t *testing.T) {
	t.Parallel()
	const (
		foldServer = "cat >fold.yaml <<'EOF'"
		foldLoop   = "for i in 1 2 3; do"
		rateServer = "cat >admission.yaml <<'EOF'"
		rateLoop   = "for i in $(seq 30); do"
	)
	needs(t, "curl")
	blocks := pageBlocks(t, foldingDoc, []string{foldServer, foldLoop, rateServer, rateLoop}, nil)
	r := newPageReader(t, foldingDoc, blocks, commandsBin(t))
	addr := eventsdtest.FreeAddr(t)
	// eventsd is built once and on PATH (go run would build it again at
	// each block), and listens on a free port instead of 8080, which
	// another test may hold; the blocks reach it there.
	r.substitute("go run ./cmd/eventsd", "eventsd --listen "+addr)
	r.substitute("127.0.0.1:8080", addr)

	stop := r.start(foldServer, "eventsd serving")
	out := r.run(foldLoop)
	if n := strings.Count(out, "Warning:"); n != 2 {
		t.Errorf("kubectl printed %d Warnings of a fold, want 2 (the second and third create):\n%s", n, out)
	}
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	evs, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=crash-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].Count != 3 {
		t.Fatalf("after three creates eventsd stores %d events about crash-1 (%+v), want one of count 3", len(evs.Items), evs.Items)
	}
	// The three creates were answered with the stored event's name, and
	// the get lists it once.
	name := evs.Items[0].Name
	if n := strings.Count(out, "event/"+name+" created"); n != 3 {
		t.Errorf("kubectl printed event/%s created %d times, want 3 (each create answered with the stored event):\n%s", name, n, out)
	}
	if n := strings.Count(out, "Back-off restarting failed container app"); n != 1 {
		t.Errorf("kubectl get events listed %d events about crash-1, want 1:\n%s", n, out)

	}
	if logs := stop(); !strings.Contains(logs, `msg="fold rule" rule=crashloop window=10m reasons=BackOff,FailedSync`) {
		t.Errorf("eventsd did not log the fold rule as the page shows:\n%s", logs)
	}

	// The rate limits' eventsd, on the same port as the page has it.
	stop = r.start(rateServer, "eventsd serving")
	out = r.run(rateLoop)
	created, refused := codeCount(t, out, "201"), codeCount(t, out, "429")
	if created < 25 || created > 26 || created+refused != 30 {
		t.Errorf("30 creates about one Pod: %d created, %d refused 429; want 25 or 26 (SourceAndObject's burst, refilled at 1/s) created and the rest refused:\n%s", created, refused, out)
	}
	// The refusal, as the page tells it: 429 TooManyRequests with a
	// Retry-After header and details.retryAfterSeconds (asked with plain
	// HTTP: client-go would wait and retry).
	body := `{"metadata": {"generateName": "flood-1."}, "involvedObject": {"kind": "Pod", "namespace": "default", "name": "flood-1"}, "reason": "Flood", "type": "Normal", "source": {"component": "my-script"}}`
	resp, err := http.Post("http://"+addr+"/api/v1/namespaces/default/events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var status metav1.Status
	err = json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || err != nil ||
		status.Reason != metav1.StatusReasonTooManyRequests || status.Details == nil || status.Details.RetryAfterSeconds < 1 {
		t.Errorf("one more create about the Pod: %s, Retry-After %q, %+v (%v); want 429 TooManyRequests with a delay in the header and the details", resp.Status, resp.Header.Get("Retry-After"), status, err)
	}
	logs := stop()
	if !strings.Contains(logs, `msg="event rate limit" type=Namespace qps=50 burst=100 cacheSize=2000`) {
		t.Errorf("eventsd did not log its Namespace limit as the page shows:\n%s", logs)
	}
}

// codeCount is the count `uniq -c` printed for the HTTP status code.
func codeCount(t *testing.T, out, code string) int {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == code {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}
