package ui_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the tests leave no goroutine behind (servers,
// recorders, the browser's connection).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
