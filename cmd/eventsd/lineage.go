package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
// from every stored event, and, given the client configuration of a
// cluster (the mirror's source, or --lineage-kubeconfig), from its
// object metadata. Stop it before the store closes.
func startLineage(ctx context.Context, store storage.Interface, cluster *rest.Config, reg prometheus.Registerer, log *slog.Logger) (*runningLineage, error) {
	opts := lineage.Options{Clock: clock.RealClock{}, Log: log.With("part", "lineage"), Events: lineage.StoreChecker{Store: store}}
	if rs, ok := store.(storage.RecordStore); ok {
		opts.Store = rs
	}
	g := lineage.New(opts)
	if err := g.Load(ctx); err != nil {
		return nil, err
	}
	g.SetLearning(noMetadataReason)
	if reg != nil {
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eventsd_lineage_objects",
			Help: "Objects the ownership lineage holds (deleted ones included, until no kept event needs them)."},
			func() float64 { return float64(g.Len()) })); err != nil {
			return nil, fmt.Errorf("the lineage's metrics: %w", err)
		}
	}
	var follower *lineage.Follower
	if cluster != nil {
		cfg := rest.CopyConfig(cluster)
		// The metadata client asks for PartialObjectMetadata itself.
		cfg.ContentType, cfg.AcceptContentTypes = "", ""
		cfg.UserAgent = "eventsd-lineage/" + buildinfo.Get().GitVersion
		mc, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("the lineage's metadata client: %w", err)
		}
		mapper, err := lineage.NewMapper(cfg)
		if err != nil {
			return nil, fmt.Errorf("the lineage's discovery client: %w", err)
		}
		if follower, err = lineage.NewFollower(lineage.FollowerOptions{Metadata: mc, Mapper: mapper, Graph: g,
			Log: opts.Log, Registerer: reg}); err != nil {
			return nil, err
		}
	}
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
	learner := lineage.EventLearnerOptions{Store: store, Cursors: cursors, Graph: g, Log: opts.Log}
	from := "events"
	if follower != nil {
		learner.NoteKind = follower.NoteKind
		from = "events and the object metadata of " + cluster.Host
		rl.wg.Add(1)
		go func() {
			defer rl.wg.Done()
			if err := follower.Run(rctx); err != nil {
				log.Error("lineage: following object metadata stopped", "err", err)
			}
		}()
	}
	go func() {
		defer rl.wg.Done()
		lineage.RunEventLearner(rctx, learner)
	}()
	log.Info("learning ownership for family queries", "objects", g.Len(), "from", from)
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

// lineageCluster returns the client configuration of the cluster whose
// object metadata the lineage follows: --lineage-kubeconfig's (a path, or
// in-cluster), else the mirror's source's, else none.
func lineageCluster(o options, src *source) (*rest.Config, error) {
	switch {
	case !o.lineage && o.lineageKubeconfig != "":
		return nil, errors.New("--lineage-kubeconfig needs --lineage")
	case o.lineageKubeconfig == sourceInCluster:
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--lineage-kubeconfig=in-cluster: %w", err)
		}
		return c, nil
	case o.lineageKubeconfig != "":
		c, err := clientcmd.BuildConfigFromFlags("", o.lineageKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--lineage-kubeconfig %s: %w", o.lineageKubeconfig, err)
		}
		return c, nil
	case src != nil:
		return src.cfg, nil
	}
	return nil, nil
}
