package readme

import (
	"strings"
	"testing"

	"github.com/kubevents/kubevents/export/exportconfig"
	"github.com/kubevents/kubevents/retention"
)

// TestConfigExamplesDecode decodes README.md's example configuration
// files (```yaml blocks declaring one of eventsd's kinds) with eventsd's
// own strict decoders, so that an example a user copies is accepted.
func TestConfigExamplesDecode(t *testing.T) {
	seen := map[string]int{}
	for _, b := range blocks(t, "yaml") {
		var err error
		switch {
		case strings.Contains(b, "kind: "+exportconfig.ConfigurationKind):
			seen[exportconfig.ConfigurationKind]++
			_, err = exportconfig.Decode([]byte(b))
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
	for _, kind := range []string{exportconfig.ConfigurationKind, retention.ConfigurationKind} {
		if seen[kind] == 0 {
			t.Errorf("README has no %s example", kind)
		}
	}
}
