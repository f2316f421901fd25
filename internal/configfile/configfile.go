// Package configfile decodes eventsd's own configuration files (retention,
// export): YAML or JSON, strictly, with the apiVersion and kind they must
// declare, the way kube-apiserver decodes its configuration files.
package configfile

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode reads data, YAML or JSON, into into, which must embed
// metav1.TypeMeta reachable through typeMeta, and checks that it declares
// apiVersion and kind. Unknown and duplicate fields are errors, so that a
// misspelt key is not silently "any"; errors name kind.
func Decode(data []byte, into any, typeMeta func() metav1.TypeMeta, apiVersion, kind string) error {
	// YAMLToJSONStrict refuses duplicate keys; the strict JSON decoder
	// names unknown fields with their path (rules[0].namespace).
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", kind, err)
	}
	strict, err := sigsjson.UnmarshalStrict(js, into, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", kind, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("decoding %s: %w", kind, errors.Join(strict...))
	}
	if tm := typeMeta(); tm.APIVersion != apiVersion || tm.Kind != kind {
		return fmt.Errorf("decoding %s: want apiVersion %s, kind %s; found apiVersion %q, kind %q",
			kind, apiVersion, kind, tm.APIVersion, tm.Kind)
	}
	return nil
}
