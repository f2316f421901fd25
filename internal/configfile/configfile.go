// Package configfile decodes eventsd's own configuration files (retention,
// export): YAML or JSON, strictly, with the apiVersion and kind they must
// declare, the way kube-apiserver decodes its configuration files.
package configfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

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
		return fmt.Errorf("decoding %s: %w", kind, withPath(js, err))
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

// withPath turns a JSON type error (a boolean where a string belongs),
// whose message names Go types and a field without its list indexes
// ("Go struct field Config.sinks.webhook.headers of type string"), into
// a field error naming the value's path in the file as validation errors
// do: sinks[0].webhook.headers[X]: Invalid value: true: want a string.
// Other errors, and a type error whose value is not found in doc, are
// returned as they are.
func withPath(doc []byte, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	var tree any
	if json.Unmarshal(doc, &tree) != nil {
		return err
	}
	kind, _, _ := strings.Cut(te.Value, " ") // "number 5" is a number
	var segments []string
	if te.Field != "" {
		segments = strings.Split(te.Field, ".")
	}
	p, v, ok := findValue(tree, segments, nil, kind, true)
	if !ok || p == nil {
		return err
	}
	detail := "want " + jsonType(te.Type)
	switch v.(type) {
	case map[string]any:
		return field.Invalid(p, field.OmitValueType{}, detail+", not an object")
	case []any:
		return field.Invalid(p, field.OmitValueType{}, detail+", not a list")
	}
	return field.Invalid(p, v, detail)
}

// findValue finds, under node at path p, the first value of JSON kind
// kind (bool, number, string, object, array) along the field names
// segments: every element of a list is tried in turn, and names that are
// not keys (Go's embedded structs, which JSON inlines) are skipped. Where
// the names end on a key (matched), a map's values or a list's elements
// are tried too: the type error of a value in a map or list names the map
// or list.
func findValue(node any, segments []string, p *field.Path, kind string, matched bool) (*field.Path, any, bool) {
	if list, ok := node.([]any); ok && len(segments) > 0 {
		for i, el := range list {
			if q, v, ok := findValue(el, segments, p.Index(i), kind, matched); ok {
				return q, v, true
			}
		}
		return nil, nil, false
	}
	if len(segments) == 0 {
		if !matched {
			return nil, nil, false
		}
		if jsonKind(node) == kind {
			return p, node, true
		}
		switch n := node.(type) {
		case map[string]any:
			keys := make([]string, 0, len(n))
			for k := range n {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if jsonKind(n[k]) == kind {
					return p.Key(k), n[k], true
				}
			}
		case []any:
			for i, el := range n {
				if jsonKind(el) == kind {
					return p.Index(i), el, true
				}
			}
		}
		return nil, nil, false
	}
	obj, ok := node.(map[string]any)
	if !ok {
		return nil, nil, false
	}
	child, ok := obj[segments[0]]
	if !ok {
		return findValue(node, segments[1:], p, kind, false)
	}
	if p == nil {
		return findValue(child, segments[1:], field.NewPath(segments[0]), kind, true)
	}
	return findValue(child, segments[1:], p.Child(segments[0]), kind, true)
}

// jsonKind names a decoded JSON value's kind as json.UnmarshalTypeError
// does.
func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

// jsonType says what JSON a Go type takes.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}
