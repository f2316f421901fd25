// Package configfile decodes eventsd's own configuration files (retention,
// export): YAML or JSON, strictly, with the apiVersion and kind they must
// declare, the way kube-apiserver decodes its configuration files.
package configfile

import (
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// Validator is a decoded configuration that checks itself.
type Validator interface {
	Validate() field.ErrorList
}

// DecodeValid is Decode followed by into's Validate: the errors of both
// name kind.
func DecodeValid(data []byte, into Validator, typeMeta func() metav1.TypeMeta, apiVersion, kind string) error {
	if err := Decode(data, into, typeMeta, apiVersion, kind); err != nil {
		return err
	}
	if errs := into.Validate(); len(errs) > 0 {
		return fmt.Errorf("invalid %s: %w", kind, errs.ToAggregate())
	}
	return nil
}

// Load reads the file at path and hands its bytes to decode; errors say
// what the file is ("retention config") and, once read, its path.
func Load(path, what string, decode func([]byte) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := decode(data); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}
