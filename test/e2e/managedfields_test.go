package e2e

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mfEntries reads an event's managedFields as kubectl shows them.
func mfEntries(t *testing.T, out string) []metav1.ManagedFieldsEntry {
	t.Helper()
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("kubectl -o json: %v\n%s", err, out)
	}
	return obj.Metadata.ManagedFields
}

// mfFields is the fieldsV1 of the entry of manager and operation, as
// compact JSON; "" without one.
func mfFields(es []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType) (apiVersion, fields string) {
	for _, e := range es {
		if e.Manager == manager && e.Operation == op && e.FieldsV1 != nil {
			var b bytes.Buffer
			if json.Compact(&b, e.FieldsV1.Raw) != nil {
				return e.APIVersion, string(e.FieldsV1.Raw)
			}
			return e.APIVersion, b.String()
		}
	}
	return "", ""
}

// mfManagers lists "manager/operation" of every entry, in order.
func mfManagers(es []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	return out
}

// TestKubectlManagedFields: with the real kubectl, the managedFields of
// events written through eventsd are kube-apiserver's: create, merge and
// strategic patches record kubectl-create and kubectl-patch (operation
// Update) with the fields each set, in the version written through; a
// server-side apply records kubectl (operation Apply), another manager's
// apply of a field kubectl owns is refused with kube-apiserver's
// conflict message, and --force-conflicts takes the field over. The
// same kubectl commands against kube-apiserver v1.37.2 (by hand, with the
// shared upstream tools) printed byte-identical managedFields (manager,
// operation, apiVersion, fieldsV1), conflict message and labels.
func TestKubectlManagedFields(t *testing.T) {
	t.Parallel()
	p, kc := kubectlStart(t)
	get := func(kind, name string) []metav1.ManagedFieldsEntry {
		t.Helper()
		return mfEntries(t, kubectlOK(t, p, kc, "get", kind, name, "-o", "json", "--show-managed-fields").Stdout)
	}

	// core/v1: create, merge patch, strategic patch.
	kubectlOK(t, p, kc, "create", "-f", kubectlWriteFile(t, "core.yaml", kubectlCoreYAML("mf.core", "")))
	es := get("events", "mf.core")
	if v, f := mfFields(es, "kubectl-create", metav1.ManagedFieldsOperationUpdate); v != "v1" ||
		f != `{"f:count":{},"f:firstTimestamp":{},"f:involvedObject":{},"f:lastTimestamp":{},"f:message":{},"f:reason":{},"f:source":{"f:component":{},"f:host":{}},"f:type":{}}` {
		t.Errorf("after kubectl create: %s %s (%v)", v, f, mfManagers(es))
	}
	kubectlOK(t, p, kc, "patch", "events", "mf.core", "--type", "merge", "-p", `{"message":"patched"}`)
	kubectlOK(t, p, kc, "patch", "events", "mf.core", "-p", `{"count":4}`)
	es = get("events", "mf.core")
	if got := mfManagers(es); !slices.Equal(got, []string{"kubectl-create/Update", "kubectl-patch/Update"}) {
		t.Errorf("managers after two patches: %v", got)
	}
	if v, f := mfFields(es, "kubectl-patch", metav1.ManagedFieldsOperationUpdate); v != "v1" || f != `{"f:count":{},"f:message":{}}` {
		t.Errorf("kubectl-patch's entry: %s %s", v, f)
	}
	if _, f := mfFields(es, "kubectl-create", metav1.ManagedFieldsOperationUpdate); strings.Contains(f, "f:message") || strings.Contains(f, "f:count") {
		t.Errorf("kubectl-create still owns what kubectl-patch changed: %s", f)
	}

	// events.k8s.io/v1: a merge patch of a label through that group.
	kubectlOK(t, p, kc, "create", "-f", kubectlWriteFile(t, "new.yaml", kubectlEventsV1YAMLFor("mf.new", "Normal", "")))
	kubectlOK(t, p, kc, "patch", "events.events.k8s.io", "mf.new", "--type", "merge", "-p", `{"metadata":{"labels":{"team":"a"}}}`)
	es = get("events.events.k8s.io", "mf.new")
	if v, f := mfFields(es, "kubectl-create", metav1.ManagedFieldsOperationUpdate); v != "events.k8s.io/v1" ||
		f != `{"f:action":{},"f:eventTime":{},"f:note":{},"f:reason":{},"f:regarding":{},"f:reportingController":{},"f:reportingInstance":{},"f:type":{}}` {
		t.Errorf("events.k8s.io create's entry: %s %s", v, f)
	}
	if v, f := mfFields(es, "kubectl-patch", metav1.ManagedFieldsOperationUpdate); v != "events.k8s.io/v1" || f != `{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}` {
		t.Errorf("events.k8s.io label patch's entry: %s %s", v, f)
	}

	// A partial configuration applied to an existing event (README's
	// tour): the rest stays, the label is the applier's.
	partial := kubectlWriteFile(t, "partial.yaml", "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {name: mf.new, labels: {owner: web}}\n")
	kubectlOK(t, p, kc, "apply", "--server-side", "-f", partial)
	es = get("events.events.k8s.io", "mf.new")
	if v, f := mfFields(es, "kubectl", metav1.ManagedFieldsOperationApply); v != "events.k8s.io/v1" || f != `{"f:metadata":{"f:labels":{"f:owner":{}}}}` {
		t.Errorf("a partial apply's entry: %s %s (%v)", v, f, mfManagers(es))
	}

	// Server-side apply: create, then a conflicting apply by another
	// manager, then forced.
	base := kubectlEventsV1YAMLFor("mf.apply", "Normal", "")
	withLabel := func(owner string) string {
		return strings.Replace(base, "  name: mf.apply\n", "  name: mf.apply\n  labels:\n    owner: "+owner+"\n", 1)
	}
	applied := kubectlWriteFile(t, "apply.yaml", withLabel("kubectl"))
	r := kubectlOK(t, p, kc, "apply", "--server-side", "-f", applied)
	if !strings.Contains(r.Stdout, "event.events.k8s.io/mf.apply serverside-applied") {
		t.Errorf("kubectl apply --server-side: stdout %q", r.Stdout)
	}
	es = get("events.events.k8s.io", "mf.apply")
	if v, f := mfFields(es, "kubectl", metav1.ManagedFieldsOperationApply); v != "events.k8s.io/v1" || !strings.Contains(f, `"f:labels":{"f:owner":{}}`) || !strings.Contains(f, `"f:note":{}`) {
		t.Errorf("the apply's entry: %s %s (%v)", v, f, mfManagers(es))
	}
	other := kubectlWriteFile(t, "other.yaml", withLabel("other"))
	r = kubectlFails(t, p, kc, "apply", "--server-side", "--field-manager", "other", "-f", other)
	if want := `Apply failed with 1 conflict: conflict with "kubectl": .metadata.labels.owner`; !strings.Contains(r.Stderr, want) {
		t.Errorf("a conflicting apply: stderr %q, want %q", r.Stderr, want)
	}
	kubectlOK(t, p, kc, "apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", other)
	es = get("events.events.k8s.io", "mf.apply")
	if _, f := mfFields(es, "other", metav1.ManagedFieldsOperationApply); !strings.Contains(f, `"f:owner":{}`) {
		t.Errorf("after the forced apply, other's entry: %s (%v)", f, mfManagers(es))
	}
	if _, f := mfFields(es, "kubectl", metav1.ManagedFieldsOperationApply); strings.Contains(f, `"f:owner"`) {
		t.Errorf("after the forced apply, kubectl still owns the label: %s", f)
	}
	lbl := kubectlOK(t, p, kc, "get", "events.events.k8s.io", "mf.apply", "-o", "jsonpath={.metadata.labels.owner}")
	if lbl.Stdout != "other" {
		t.Errorf("the label after the forced apply: %q", lbl.Stdout)
	}
}
