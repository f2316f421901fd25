package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/storage"
	"k8s.io/utils/clock"
)

// noMetadataReason is what family queries say when eventsd reads no
// cluster's object metadata: families then come from events alone.
const noMetadataReason = "ownership is learned from events only (controllers' SuccessfulCreate and ScalingReplicaSet events): eventsd reads no cluster's object metadata; give --source-kubeconfig or --source=in-cluster"

// runningLineage is the ownership lineage and what feeds it.
type runningLineage struct {
	graph *lineage.Graph
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// startLineage loads the lineage the store kept and starts learning:
// from every stored event, and (with a source) from the source's object
// metadata. Stop it before the store closes.
func startLineage(ctx context.Context, store storage.Interface, log *slog.Logger) (*runningLineage, error) {
	opts := lineage.Options{Clock: clock.RealClock{}, Log: log.With("part", "lineage"), Events: lineage.StoreChecker{Store: store}}
	if rs, ok := store.(storage.RecordStore); ok {
		opts.Store = rs
	}
	g := lineage.New(opts)
	if err := g.Load(ctx); err != nil {
		return nil, err
	}
	g.SetLearning(noMetadataReason)
	rctx, cancel := context.WithCancel(context.Background())
	rl := &runningLineage{graph: g, stop: cancel}
	cursors, _ := store.(storage.CursorStore)
	if opts.Store == nil {
		cursors = nil // without its records, the lineage must relearn every event at each start
	}
	rl.wg.Add(2)
	go func() {
		defer rl.wg.Done()
		g.Run(rctx)
	}()
	go func() {
		defer rl.wg.Done()
		lineage.RunEventLearner(rctx, lineage.EventLearnerOptions{Store: store, Cursors: cursors, Graph: g, Log: opts.Log})
	}()
	log.Info("learning ownership for family queries", "objects", g.Len(), "from", "events")
	return rl, nil
}

// Stop stops learning and saves the lineage.
func (rl *runningLineage) Stop() {
	if rl == nil {
		return
	}
	rl.stop()
	rl.wg.Wait()
}
