package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/access"
	"github.com/kubevents/kubevents/demo"
)

// checkDemo refuses --demo where its story could not be written: the
// demo is an anonymous client of eventsd's own API, which a mirror keeps
// read-only and authentication closes to it.
func checkDemo(o options) error {
	if !o.demo {
		return nil
	}
	if o.source.enabled() || o.sourcesConfig != "" {
		return errors.New("--demo writes its own events, and a mirror's API is read-only: give --demo or --source/--source-kubeconfig/--sources-config, not both")
	}
	a := o.access
	if a.TokenAuthFile != "" || a.TokenWebhookConfigFile != "" || a.AuthenticationKubeconfig != "" || a.ClientCert.ClientCA != "" || a.RequestHeader.ClientCAFile != "" ||
		!slices.Equal(o.authzModes, []string{access.ModeAlwaysAllow}) {
		return errors.New("--demo writes its events as an anonymous client of eventsd's API: give it without authentication and authorization flags")
	}
	return nil
}

// demoDataDir is where --demo keeps its store when --data-dir is not
// given: a new temporary directory, so that the demo's events stay out of
// ./eventsd-data. Its removal is returned.
func demoDataDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "eventsd-demo-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// startDemo writes the demo's story through api, eventsd's own API
// reached over an in-memory connection (whatever --listen and TLS are),
// and keeps it going until the returned stop is called.
func startDemo(api http.Handler, log *slog.Logger) (stop func()) {
	lis := newPipeListener()
	hs := &http.Server{Handler: api, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(lis)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs, err := kubernetes.NewForConfig(&rest.Config{
			Host: "http://eventsd-demo",
			QPS:  -1,
			Dial: func(ctx context.Context, _, _ string) (net.Conn, error) { return lis.dial(ctx) },
		})
		if err == nil {
			err = demo.Run(ctx, demo.Options{Client: cs, Logger: log})
		}
		if err != nil && ctx.Err() == nil {
			log.Error("the demo could not write its story", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
		hs.Close()
		<-served
	}
}

// pipeListener is a net.Listener of in-memory connections (net.Pipe),
// which the demo's client dials: its requests reach the API with no port
// of their own, whatever --listen and TLS are. (grpc's bufconn was tried
// first: its connections' read deadlines, which the server sets and
// clears around each request body, cancelled some requests.)
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// dial connects to the listener.
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Accept implements net.Listener.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr implements net.Listener.
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// pipeAddr is a pipeListener's address.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "eventsd-demo" }
