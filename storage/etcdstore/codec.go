package etcdstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// Value prefixes kube-apiserver writes.
var (
	// protoMagic starts application/vnd.kubernetes.protobuf values.
	protoMagic = []byte("k8s\x00")
	// encryptedPrefix starts values encrypted at rest by an
	// EncryptionConfiguration provider.
	encryptedPrefix = []byte("k8s:enc:")
)

// eventGVK is what every stored value holds: both API groups store
// core/v1 Events.
var eventGVK = corev1.SchemeGroupVersion.WithKind("Event")

// ErrEncrypted marks a value encrypted at rest: the store has no keys to
// read it. Test with errors.Is; the error is an *EncryptedError.
var ErrEncrypted = errors.New("value is encrypted at rest")

// EncryptedError names the key whose value is encrypted and the provider
// that encrypted it (what follows "k8s:enc:", e.g. "aescbc:v1:key1").
type EncryptedError struct {
	Key, Provider string
}

// Error implements error.
func (e *EncryptedError) Error() string {
	return fmt.Sprintf("etcd key %s: %v by provider %q; eventsd cannot decrypt it", e.Key, ErrEncrypted, e.Provider)
}

// Unwrap makes errors.Is(err, ErrEncrypted) true.
func (e *EncryptedError) Unwrap() error { return ErrEncrypted }

// maxProviderLen bounds the provider name quoted in errors: it comes from
// stored bytes.
const maxProviderLen = 64

// codec encodes Events as kube-apiserver stores them (protobuf in the
// runtime.Unknown envelope) and decodes protobuf and JSON values.
type codec struct {
	proto *protobuf.Serializer
	json  *json.Serializer
}

func newCodec() *codec {
	return &codec{
		proto: protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
		json:  json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{}),
	}
}

// encode returns ev's stored form: without resourceVersion (the etcd
// revision is the version) and without selfLink, as kube-apiserver's
// storage prepares objects (APIObjectVersioner.PrepareObjectForStorage),
// with apiVersion v1 and kind Event in the envelope. ev is not modified.
func (c *codec) encode(ev *corev1.Event) ([]byte, error) {
	cp := *ev
	cp.TypeMeta = metav1.TypeMeta{APIVersion: eventGVK.GroupVersion().String(), Kind: eventGVK.Kind}
	cp.ResourceVersion = ""
	cp.SelfLink = ""
	var buf bytes.Buffer
	if err := c.proto.Encode(&cp, &buf); err != nil {
		return nil, fmt.Errorf("etcdstore: encode %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	return buf.Bytes(), nil
}

// decode reads a stored value of key, in protobuf or JSON, and sets its
// resourceVersion to rev. Encrypted values give an *EncryptedError.
func (c *codec) decode(key string, value []byte, rev int64) (*corev1.Event, error) {
	var d runtime.Decoder
	switch {
	case bytes.HasPrefix(value, protoMagic):
		d = c.proto
	case bytes.HasPrefix(value, encryptedPrefix):
		return nil, &EncryptedError{Key: key, Provider: provider(value[len(encryptedPrefix):])}
	case len(bytes.TrimLeft(value, " \t\r\n")) > 0 && bytes.TrimLeft(value, " \t\r\n")[0] == '{':
		d = c.json
	default:
		return nil, fmt.Errorf("etcd key %s: value is neither protobuf nor JSON (%d bytes)", key, len(value))
	}
	obj, gvk, err := d.Decode(value, nil, &corev1.Event{})
	if err != nil {
		return nil, fmt.Errorf("etcd key %s: %w", key, err)
	}
	ev, ok := obj.(*corev1.Event)
	if !ok || (gvk != nil && *gvk != eventGVK) {
		return nil, fmt.Errorf("etcd key %s: holds %v, not a v1 Event", key, gvkString(gvk))
	}
	ev.TypeMeta = metav1.TypeMeta{}
	ev.ResourceVersion = fmt.Sprint(rev)
	return ev, nil
}

func gvkString(gvk *schema.GroupVersionKind) string {
	if gvk == nil {
		return "an unknown kind"
	}
	return gvk.String()
}

// provider returns the provider part of an encrypted value's header:
// type, version and key name ("aescbc:v1:key1"), or fewer fields when the
// header is shorter, printable and bounded.
func provider(rest []byte) string {
	if len(rest) > maxProviderLen {
		rest = rest[:maxProviderLen]
	}
	fields := strings.SplitN(string(rest), ":", 4)
	if len(fields) > 3 {
		fields = fields[:3]
	}
	p := strings.Join(fields, ":")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, p)
}

// NewValueEncoder returns a function giving the value the store writes for
// an event under its key (kube-apiserver's stored form, see encode), for
// tools that load an etcd directly rather than through a Store:
// eventsbench's bulk fill writes many per transaction. The function may
// be called concurrently.
func NewValueEncoder() func(ev *corev1.Event) ([]byte, error) { return newCodec().encode }
