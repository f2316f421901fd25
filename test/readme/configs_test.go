package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/eventmetrics"
	"github.com/kubevents/kubevents/export/exportconfig"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/mirror/sourcesconfig"
	"github.com/kubevents/kubevents/retention"
)

// admissionKind is the kind of kube-apiserver's admission configuration
// file, which holds the EventRateLimit configuration.
const admissionKind = "AdmissionConfiguration"

// TestConfigExamplesDecode decodes the example configuration files of
// README.md and docs/ (```yaml blocks, and files written by heredocs in
// ```sh blocks, declaring one of eventsd's kinds) with eventsd's own
// strict decoders, so that an example a user copies is accepted.
func TestConfigExamplesDecode(t *testing.T) {
	seen := map[string]int{}
	examples := blocks(t, "yaml")
	for _, b := range blocks(t, "sh") {
		for _, m := range heredoc.FindAllStringSubmatch(b.text, -1) {
			examples = append(examples, block{file: b.file, lang: "sh", text: m[1]})
		}
	}
	for _, b := range examples {
		var err error
		switch {
		case strings.Contains(b.text, "kind: "+exportconfig.ConfigurationKind):
			seen[exportconfig.ConfigurationKind]++
			_, err = exportconfig.Decode([]byte(b.text))
		case strings.Contains(b.text, "kind: "+eventmetrics.ConfigurationKind):
			seen[eventmetrics.ConfigurationKind]++
			_, err = eventmetrics.Decode([]byte(b.text))
		case strings.Contains(b.text, "kind: "+fold.ConfigurationKind):
			seen[fold.ConfigurationKind]++
			_, err = fold.Decode([]byte(b.text))
		case strings.Contains(b.text, "kind: "+sourcesconfig.ConfigurationKind):
			seen[sourcesconfig.ConfigurationKind]++
			_, err = sourcesconfig.Decode([]byte(b.text))
		case strings.Contains(b.text, "kind: "+retention.ConfigurationKind):
			seen[retention.ConfigurationKind]++
			_, err = retention.Decode([]byte(b.text))
		case strings.Contains(b.text, "kind: "+admissionKind) && strings.Contains(b.text, eventratelimit.PluginName):
			seen[admissionKind]++
			err = decodeAdmission(t, b.text)
		default:
			continue
		}
		if err != nil {
			t.Errorf("%s: example does not decode: %v\n%s", b.file, err, b.text)
		}
	}
	for _, kind := range []string{exportconfig.ConfigurationKind, retention.ConfigurationKind, fold.ConfigurationKind, eventmetrics.ConfigurationKind, sourcesconfig.ConfigurationKind, admissionKind} {
		if seen[kind] == 0 {
			t.Errorf("README.md and docs/ have no %s example", kind)
		}
	}
}

// decodeAdmission loads an AdmissionConfiguration as eventsd's
// --admission-control-config-file does, and builds its limiter.
func decodeAdmission(t *testing.T, text string) error {
	p := filepath.Join(t.TempDir(), "admission.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := eventratelimit.LoadAdmissionConfigFile(p)
	if err != nil {
		return err
	}
	_, err = eventratelimit.New(c, eventratelimit.Options{})
	return err
}

// heredoc matches the body of `cat >FILE <<'EOF'` ... `EOF` in a shell
// block.
var heredoc = regexp.MustCompile(`(?s)<<'EOF'\n(.*?)\nEOF\n`)
