package readme

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/export/exportconfig"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/retention"
)

// TestConfigExamplesDecode decodes README.md's example configuration
// files (```yaml blocks, and files written by heredocs in ```sh blocks,
// declaring one of eventsd's kinds) with eventsd's own strict decoders, so
// that an example a user copies is accepted.
func TestConfigExamplesDecode(t *testing.T) {
	seen := map[string]int{}
	examples := blocks(t, "yaml")
	for _, b := range blocks(t, "sh") {
		for _, m := range heredoc.FindAllStringSubmatch(b, -1) {
			examples = append(examples, m[1])
		}
	}
	for _, b := range examples {
		var err error
		switch {
		case strings.Contains(b, "kind: "+exportconfig.ConfigurationKind):
			seen[exportconfig.ConfigurationKind]++
			_, err = exportconfig.Decode([]byte(b))
		case strings.Contains(b, "kind: "+fold.ConfigurationKind):
			seen[fold.ConfigurationKind]++
			_, err = fold.Decode([]byte(b))
		case strings.Contains(b, "kind: "+retention.ConfigurationKind):
			seen[retention.ConfigurationKind]++
			_, err = retention.Decode([]byte(b))
		default:
			continue
		}
		if err != nil {
			t.Errorf("README example does not decode: %v\n%s", err, b)
		}
	}
	for _, kind := range []string{exportconfig.ConfigurationKind, retention.ConfigurationKind, fold.ConfigurationKind} {
		if seen[kind] == 0 {
			t.Errorf("README has no %s example", kind)
		}
	}
}

// heredoc matches the body of `cat >FILE <<'EOF'` ... `EOF` in a shell
// block.
var heredoc = regexp.MustCompile(`(?s)<<'EOF'\n(.*?)\nEOF\n`)
