// Package pager walks a paged Kubernetes list.
package pager

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each calls list with opts, then again with each continue token the
// previous page returned, until a page returns none, and hands every page
// to each. opts (its selectors and Limit) is the caller's; Each only sets
// Continue. The first error of list or each ends the walk and is returned
// as is.
func Each[L interface{ GetContinue() string }](ctx context.Context, opts metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (L, error), each func(L) error) error {
	for {
		page, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if err := each(page); err != nil {
			return err
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}
