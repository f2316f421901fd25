package lineage

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ID identifies an object in a Graph: its uid or, for an object known only
// from a controller's event that named it, "name:<kind>:<namespace>:<name>"
// (kinds and Kubernetes names hold no ':').
type ID string

// nameIDPrefix starts the IDs of objects known only by name.
const nameIDPrefix = "name:"

// NameID returns the ID of an object known only by its kind, namespace and
// name.
func NameID(kind, namespace, name string) ID {
	return ID(nameIDPrefix + kind + ":" + namespace + ":" + name)
}

// ByName reports whether id is the ID of an object known only by name.
func (id ID) ByName() bool { return strings.HasPrefix(string(id), nameIDPrefix) }

// Object is what a Graph keeps of one object.
type Object struct {
	// ID is the object's uid, or a NameID when only its name is known.
	ID ID `json:"-"`
	// APIVersion and Kind are the object's type, as its events name it.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	// Namespace is empty for cluster-scoped objects.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Owners are the IDs of the object's owners (its ownerReferences'
	// uids, or a controller's NameID when only an event named it).
	Owners []ID `json:"owners,omitempty"`
	// Node is the node a Pod ran on.
	Node string `json:"node,omitempty"`
	// FirstSeen is the object's creation time, or the first time anything
	// showed it existed; LastSeen the last time it was seen existing.
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	// Deleted is set once the object was seen deleted (then LastSeen is
	// when).
	Deleted bool `json:"deleted,omitempty"`
}

// UID returns the object's uid, or "" for an object known only by name.
func (o *Object) UID() types.UID {
	if o.ID.ByName() {
		return ""
	}
	return types.UID(o.ID)
}

// String names the object as kubectl does: kind/namespace/name.
func (o *Object) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// encode returns the record a RecordStore keeps for o.
func (o *Object) encode() []byte {
	b, _ := json.Marshal(o) // a struct of strings, times and bools always marshals
	return b
}

// decodeObject reads the record of key.
func decodeObject(key string, value []byte) (*Object, error) {
	o := &Object{ID: ID(key)}
	if err := json.Unmarshal(value, o); err != nil {
		return nil, fmt.Errorf("lineage: record %q: %w", key, err)
	}
	return o, nil
}

// ident is an object's kind (lower case, so that family.kind=deployment
// finds Deployments), namespace and name.
type ident struct{ kind, namespace, name string }

func identOf(kind, namespace, name string) ident {
	return ident{strings.ToLower(kind), namespace, name}
}
