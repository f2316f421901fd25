package refdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Through the cluster's API (aggregated)":    "through-the-clusters-api-aggregated",
		"How long: --event-ttl and retention rules": "how-long---event-ttl-and-retention-rules",
		"ExportConfiguration `sinks[].webhook.tls`": "exportconfiguration-sinkswebhooktls",
		"evctl get":          "evctl-get",
		"Keep events_longer": "keep-events_longer",
	} {
		if got := Anchor(heading); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestCommands renders a small tree: subcommands linked and in sections
// of their own, persistent flags once, hidden ones and help left out,
// defaults shown, Markdown in help escaped.
func TestCommands(t *testing.T) {
	root := &cobra.Command{Use: "tool", Short: "Does things.", Long: "Tool does things.\n\n  tool get --since 10m"}
	root.PersistentFlags().StringP("output", "o", "", "Output format: wide | json.")
	get := &cobra.Command{Use: "get", Short: "Get things", Run: func(*cobra.Command, []string) {}}
	get.Flags().Duration("since", 0, "Only things newer than <since>.")
	get.Flags().Int("limit", 500, "Most things.")
	get.Flags().Bool("secret", false, "Hidden.")
	if err := get.Flags().MarkHidden("secret"); err != nil {
		t.Fatal(err)
	}
	root.AddCommand(get, &cobra.Command{Use: "old", Hidden: true, Run: func(*cobra.Command, []string) {}})

	page := string(Commands(root, "go test ./tool -update"))
	contains(t, page,
		"# tool\n",
		"`go test ./tool -update`",
		"Does things.\n",
		"```text\ntool get --since 10m\n```",
		"- [`tool get`](#tool-get): Get things\n",
		"| `-o, --output string` |  | Output format: wide \\| json. |",
		"## tool get\n",
		"```text\ntool get [flags]\n```",
		"| `--limit int` | `500` | Most things. |",
		"| `--since duration` | `0s` | Only things newer than &lt;since&gt;. |",
		"and the flags of every command of [`tool`](#tool).",
	)
	for _, unwanted := range []string{"secret", "tool old", "--help"} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the page has %q:\n%s", unwanted, page)
		}
	}
}

// TestConfiguration renders a kind from a module written for the test:
// json keys, inlined embedded structs, nested objects in sections linked
// from their field, a struct met twice described once, named constants'
// values.
func TestConfiguration(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("tlsconf/tls.go", `package tlsconf

// Config is a TLS client.
type Config struct {
	// CAFile verifies the server.
	CAFile string `+"`json:\"caFile,omitempty\"`"+`
}
`)
	write("conf/conf.go", `package conf

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/m/tlsconf"
)

// Defaults.
const (
	DefaultTimeout = 10 * time.Second
	DefaultSize    = 100 << 20
)

// Criteria select.
type Criteria struct {
	// Types are Normal or Warning.
	Types []string `+"`json:\"types,omitempty\"`"+`
}

// TLS is tlsconf's.
type TLS = tlsconf.Config

// File is the file.
type File struct {
	metav1.TypeMeta `+"`json:\",inline\"`"+`
	// Sinks are where.
	Sinks []Sink `+"`json:\"sinks\"`"+`
}

// Sink is one.
type Sink struct {
	Criteria `+"`json:\",inline\"`"+`
	// Timeout bounds a send; default DefaultTimeout.
	Timeout metav1.Duration `+"`json:\"timeout,omitempty\"`"+`
	// Size is at most DefaultSize (100 MiB) by default DefaultSize.
	Size int64 `+"`json:\"size,omitempty\"`"+`
	// Headers are sent.
	Headers map[string]string `+"`json:\"headers,omitempty\"`"+`
	// TLS is the sink's.
	TLS *TLS `+"`json:\"tls,omitempty\"`"+`
	// Backup has its own.
	Backup tlsconf.Config `+"`json:\"backup\"`"+`
	internal int
}
`)
	page, err := Configuration(dir, "Files", "All of them.", "regen", []Kind{{
		Title: "MyConfiguration", Intro: "The file of `--my-config`.",
		APIVersion: "my.example.com/v1", Kind: "MyConfiguration",
		Package: "example.com/m/conf", Type: "File",
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := string(page)
	contains(t, got,
		"# Files\n",
		"- [MyConfiguration](#myconfiguration)\n",
		"## MyConfiguration\n\nThe file of `--my-config`.\n\nFile is the file.\n",
		"| `apiVersion` | string | `my.example.com/v1`. Required. |",
		"| `sinks` | list of [object](#myconfiguration-sinks) | Sinks are where. |",
		"### MyConfiguration `sinks[]`\n\nSink is one.\n",
		"| `types` | list of string | Types are Normal or Warning. |",
		"| `timeout` | duration | Timeout bounds a send; default DefaultTimeout (10s). |",
		"| `size` | integer | Size is at most DefaultSize (100 MiB) by default DefaultSize (104857600). |",
		"| `headers` | map of string to string | Headers are sent. |",
		"| `tls` | [object](#myconfiguration-sinkstls) | TLS is the sink's. |",
		"### MyConfiguration `sinks[].tls`\n\nConfig is a TLS client.\n",
		"| `caFile` | string | CAFile verifies the server. |",
		"### MyConfiguration `sinks[].backup`\n\nAs [MyConfiguration sinks[].tls](#myconfiguration-sinkstls).",
	)
	if strings.Contains(got, "internal") {
		t.Errorf("the page lists an unexported field:\n%s", got)
	}

	if _, err := Configuration(dir, "Files", "", "regen", []Kind{{Title: "X", Package: "example.com/m/conf", Type: "Missing"}}); err == nil || !strings.Contains(err.Error(), "no type Missing") {
		t.Errorf("a missing type: got error %v", err)
	}
}

// TestCheck: a page that differs fails naming the command that
// regenerates it; update writes it.
func TestCheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(p, []byte("# a\nold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{TB: t}
	Check(rec, p, []byte("# a\nnew\n"), false, "go test ./x -update")
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "line 2") || !strings.Contains(rec.errors[0], "go test ./x -update") {
		t.Errorf("a stale page: errors %q", rec.errors)
	}
	rec = &recorder{TB: t}
	Check(rec, p, []byte("# a\nnew\n"), true, "go test ./x -update")
	Check(rec, p, []byte("# a\nnew\n"), false, "go test ./x -update")
	if len(rec.errors) != 0 {
		t.Errorf("after update: errors %q", rec.errors)
	}
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (r *recorder) Helper() {}

// contains fails t for each of wants that page lacks.
func contains(t *testing.T, page string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}
