package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// familyStoreFile records, beside a kept query-phase store (--store-dir),
// what it was filled with.
const familyStoreFile = "fill.json"

// familyStoreMaxAge is how old a kept store may be and still be reused:
// its events expire fillEventTTL after the fill, and the queries must
// find every one of them.
const familyStoreMaxAge = fillEventTTL - 2*time.Hour

// familyStoreInfo is what familyStoreFile holds.
type familyStoreInfo struct {
	Events     int64     `json:"events"`
	Objects    int       `json:"objects"`
	Namespaces int       `json:"namespaces"`
	Rollouts   int       `json:"rollouts"`
	PodsPerRS  int       `json:"pods_per_rs"`
	Filled     time.Time `json:"filled"`
	FillS      float64   `json:"fill_s"`
	GraphLen   int       `json:"graph_objects"`
}

// sameStore reports whether a store filled as i is the one cfg asks for.
func (i familyStoreInfo) sameStore(cfg *familyBenchConfig) bool {
	return i.Events == cfg.Events && i.Objects == cfg.Objects && i.Namespaces == cfg.Namespaces &&
		i.Rollouts == cfg.Rollouts && i.PodsPerRS == cfg.PodsPerRS
}

// reuseOrFill returns the query phase's store in dir/data: without
// --store-dir a new one filled by fillFamilies; with it, the kept one
// when dir's familyStoreFile says it was filled with these settings less
// than familyStoreMaxAge ago (the families generated again, without
// writing, for their objects and bench-0's events), else a new one, whose
// settings are then recorded. A store without the record (a fill that did
// not finish) is removed first.
func (cfg *familyBenchConfig) reuseOrFill(ctx context.Context, dir string, keep bool, q *familyQuery) (familyObjects, []*corev1.Event, int, error) {
	data := filepath.Join(dir, "data")
	if cfg.StoreDir == "" {
		return cfg.fillFamilies(ctx, data, keep, q)
	}
	recPath := filepath.Join(dir, familyStoreFile)
	var info familyStoreInfo
	b, err := os.ReadFile(recPath)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &info); err != nil {
			return familyObjects{}, nil, 0, fmt.Errorf("--store-dir: %s: %w", recPath, err)
		}
		if info.sameStore(cfg) && time.Since(info.Filled) < familyStoreMaxAge {
			return cfg.reuseStore(ctx, info, keep, q)
		}
		cfg.logf("--store-dir: the kept store (filled %s with %+v) is not this run's; filling a new one", info.Filled.Format(time.RFC3339), info)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return familyObjects{}, nil, 0, fmt.Errorf("--store-dir: %w", err)
	}
	// Only what this mode writes there is removed.
	if err := errors.Join(os.Remove(recPath), os.RemoveAll(data)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return familyObjects{}, nil, 0, fmt.Errorf("--store-dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return familyObjects{}, nil, 0, fmt.Errorf("--store-dir: %w", err)
	}
	filled := time.Now()
	fam, nsEvents, graphLen, err := cfg.fillFamilies(ctx, data, keep, q)
	if err != nil {
		return fam, nsEvents, graphLen, err
	}
	info = familyStoreInfo{Events: cfg.Events, Objects: cfg.Objects, Namespaces: cfg.Namespaces, Rollouts: cfg.Rollouts,
		PodsPerRS: cfg.PodsPerRS, Filled: filled, FillS: q.FillS, GraphLen: graphLen}
	if b, err = json.MarshalIndent(info, "", "  "); err == nil {
		err = os.WriteFile(recPath, b, 0o644)
	}
	if err != nil {
		return fam, nsEvents, graphLen, fmt.Errorf("--store-dir: recording the fill: %w", err)
	}
	return fam, nsEvents, graphLen, nil
}

// reuseStore generates the families of a kept store again, without
// writing them, for the family's objects and (when keep) bench-0's
// events.
func (cfg *familyBenchConfig) reuseStore(ctx context.Context, info familyStoreInfo, keep bool, q *familyQuery) (familyObjects, []*corev1.Event, int, error) {
	n, extra, err := cfg.noisePlan()
	if err != nil {
		return familyObjects{}, nil, 0, err
	}
	var nsEvents []*corev1.Event
	fam := cfg.generate(ctx, n, extra, info.Filled.Add(-time.Hour), func(ev *corev1.Event) {
		if keep && ev.Namespace == familyNamespace {
			nsEvents = append(nsEvents, ev)
		}
	}, func(familyObjects) {})
	if err := ctx.Err(); err != nil {
		return fam, nil, 0, err
	}
	q.FillS, q.StoreReused = info.FillS, true
	cfg.logf("--store-dir: reusing the store filled %s (%.0fs then), the lineage holding %d objects", info.Filled.Format(time.RFC3339), info.FillS, info.GraphLen)
	return fam, nsEvents, info.GraphLen, nil
}
