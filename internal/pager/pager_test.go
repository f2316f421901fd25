package pager

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type page struct {
	metav1.ListMeta
	items []string
}

func TestEach(t *testing.T) {
	pages := map[string]*page{
		"":   {ListMeta: metav1.ListMeta{Continue: "p2"}, items: []string{"a", "b"}},
		"p2": {ListMeta: metav1.ListMeta{Continue: "p3"}, items: []string{"c"}},
		"p3": {items: []string{"d"}},
	}
	var calls []metav1.ListOptions
	list := func(_ context.Context, o metav1.ListOptions) (*page, error) {
		calls = append(calls, o)
		return pages[o.Continue], nil
	}
	var got []string
	err := Each(context.Background(), metav1.ListOptions{FieldSelector: "x=y", Limit: 2}, list, func(p *page) error {
		got = append(got, p.items...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", "b", "c", "d"}, got); d != "" {
		t.Errorf("items (-want +got):\n%s", d)
	}
	want := []metav1.ListOptions{
		{FieldSelector: "x=y", Limit: 2},
		{FieldSelector: "x=y", Limit: 2, Continue: "p2"},
		{FieldSelector: "x=y", Limit: 2, Continue: "p3"},
	}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("list calls (-want +got):\n%s", d)
	}

	boom := errors.New("boom")
	calls = nil
	err = Each(context.Background(), metav1.ListOptions{}, list, func(*page) error { return boom })
	if err != boom || len(calls) != 1 {
		t.Errorf("each's error: got %v after %d calls, want it as is after 1", err, len(calls))
	}
	calls = nil
	err = Each(context.Background(), metav1.ListOptions{}, func(context.Context, metav1.ListOptions) (*page, error) {
		return nil, boom
	}, func(*page) error { t.Error("each called after a failed list"); return nil })
	if err != boom {
		t.Errorf("list's error: got %v, want it as is", err)
	}
}
