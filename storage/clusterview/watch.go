package clusterview

import (
	"sync"

	"github.com/kubevents/kubevents/storage"
)

// watcher passes on a store watch's events as the view serves them.
type watcher struct {
	w    storage.Watcher
	v    *View
	ch   chan storage.Event
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func newWatcher(w storage.Watcher, v *View) *watcher {
	cw := &watcher{w: w, v: v, ch: make(chan storage.Event), stop: make(chan struct{}), done: make(chan struct{})}
	go cw.run()
	return cw
}

func (cw *watcher) run() {
	defer close(cw.done)
	defer close(cw.ch)
	in := cw.w.ResultChan()
	for {
		select {
		case <-cw.stop:
			return
		case e, ok := <-in:
			if !ok {
				return
			}
			e.Object = cw.v.out(e.Object)
			select {
			case cw.ch <- e:
			case <-cw.stop:
				return
			}
		}
	}
}

// ResultChan implements storage.Watcher.
func (cw *watcher) ResultChan() <-chan storage.Event { return cw.ch }

// Stop implements storage.Watcher: it stops the store's watch and waits
// for the goroutine passing its events on to end.
func (cw *watcher) Stop() {
	cw.once.Do(func() {
		close(cw.stop)
		cw.w.Stop()
	})
	<-cw.done
}
