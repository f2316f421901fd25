package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestBooleanQueryParameters: boolean parameters are read as
// kube-apiserver reads them, so the official Python client's watch=True
// and allowWatchBookmarks=True stream a watch, and watch=0 or watch=False
// lists.
func TestBooleanQueryParameters(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create("a")
	const events = "/api/v1/namespaces/default/events"

	firstLine := func(query string) map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, e.url+events+query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", query, resp.StatusCode)
		}
		line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		if err != nil && len(line) == 0 {
			t.Fatalf("%s: %v", query, err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v in %s", query, err, line)
		}
		return m
	}
	for _, q := range []string{"?watch=True&allowWatchBookmarks=True", "?watch=", "?watch=yes"} {
		if m := firstLine(q); m["type"] != "ADDED" {
			t.Fatalf("%s: first line %v, want an ADDED watch event", q, m)
		}
	}
	for _, q := range []string{"?watch=0", "?watch=False", "?watch=FALSE"} {
		if m := firstLine(q); m["kind"] != "EventList" {
			t.Fatalf("%s: %v, want an EventList", q, m)
		}
	}
	// sendInitialEvents=True (with bookmarks) ends the initial events
	// with the marked bookmark; sendInitialEvents=False sends none.
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, e.url+events+
		"?watch=True&sendInitialEvents=True&allowWatchBookmarks=True&resourceVersionMatch=NotOlderThan", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var types []string
	for len(types) < 2 && sc.Scan() {
		var m struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		types = append(types, m.Type)
	}
	if len(types) != 2 || types[0] != "ADDED" || types[1] != "BOOKMARK" {
		t.Fatalf("sendInitialEvents=True: got %v, want ADDED then BOOKMARK", types)
	}
}
