package pebblestore_test

import (
	"log/slog"
	"testing"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/kubevents/kubevents/storage/storagetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string, o storagetest.Options) storage.Interface {
	t.Helper()
	s, err := pebblestore.Open(pebblestore.Options{
		Dir:              dir,
		Clock:            o.Clock,
		DefaultTTL:       o.DefaultTTL,
		HistoryMaxEvents: o.HistoryMaxEvents,
		ExpiryInterval:   o.ExpiryInterval,
		HistoryWindow:    o.HistoryWindow,
		MaxHistoryHold:   o.MaxHistoryHold,
		RingSize:         256, // small, so lagging watchers read the on-disk log
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{Open: open})
}
