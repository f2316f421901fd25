package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

func newEchoCommand() *cobra.Command {
	listen := "127.0.0.1:8081"
	cmd := &cobra.Command{
		Use:   "echo",
		Short: "Serve a trivial echo of event creates: the ceiling eventsd is compared with",
		Long: `echo answers POST /api/v1/namespaces/{ns}/events with the request body, status
201 and the request's Content-Type (JSON or protobuf), without decoding it: just enough of an
apiserver for client-go's typed Events client. Anything else is a 404. It
prints "listening on http://ADDR" once it accepts connections and stops on
SIGINT or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveEcho(cmd.Context(), listen, func(addr string) {
				fmt.Fprintf(cmd.OutOrStdout(), "listening on http://%s\n", addr)
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", listen, "Address to serve on (port 0: any free port).")
	return cmd
}

// serveEcho serves the echo handler on listen until ctx ends.
func serveEcho(ctx context.Context, listen string, ready func(addr string)) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: echoHandler(), ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	ready(ln.Addr().String())
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = hs.Shutdown(sctx)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

var echoBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var (
	jsonContentType = []string{"application/json"}
)

// echoHandler writes back the body of event creates, and nothing else.
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !isEventsCollection(r.URL.Path) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		buf := echoBuffers.Get().(*bytes.Buffer)
		defer echoBuffers.Put(buf)
		buf.Reset()
		if _, err := buf.ReadFrom(r.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h := w.Header()
		if ct := r.Header["Content-Type"]; len(ct) > 0 {
			h["Content-Type"] = ct
		} else {
			h["Content-Type"] = jsonContentType
		}
		h["Content-Length"] = []string{strconv.Itoa(buf.Len())}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(buf.Bytes())
	})
}

// isEventsCollection reports whether p is /api/v1/namespaces/{ns}/events.
func isEventsCollection(p string) bool {
	rest, ok := strings.CutPrefix(p, "/api/v1/namespaces/")
	if !ok {
		return false
	}
	ns, ok := strings.CutSuffix(rest, "/events")
	return ok && ns != "" && !strings.Contains(ns, "/")
}
