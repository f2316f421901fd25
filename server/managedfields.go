package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kubevents/kubevents/eventapi/fieldmanager"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// manager is the field manager a write of r records in managedFields:
// its fieldManager parameter, else its User-Agent's product.
func manager(r *http.Request, opts writeOptions) string {
	return fieldmanager.ManagerName(opts.fieldManager, r.UserAgent())
}

// fieldManagerErrors checks o's fieldManager as kube-apiserver's
// ValidateCreateOptions, ValidateUpdateOptions and ValidatePatchOptions
// do (at most 128 bytes, printable characters only; required for an
// apply) and, for patches (kind PatchOptions), reads force, which only an
// apply may give.
func fieldManagerErrors(q url.Values, kind string, o *writeOptions, apply bool) field.ErrorList {
	var errs field.ErrorList
	force, forced := queryBool(q, "force")
	switch {
	case apply && o.fieldManager == "":
		errs = append(errs, field.Required(field.NewPath("fieldManager"), "is required for apply patch"))
	case !apply && forced && kind == "PatchOptions":
		errs = append(errs, field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch"))
	}
	o.force = apply && force
	return append(errs, metav1validation.ValidateFieldManager(o.fieldManager, field.NewPath("fieldManager"))...)
}

// dropManagedFields clears ev's managedFields when that brings it within
// limit bytes, reporting whether it did: kube-apiserver retries a create,
// update or patch that etcd refuses as too large without them. An event
// with fields owned by an apply keeps them (upstream does not retry
// applies, which depend on them).
func dropManagedFields(ev *corev1.Event, limit int) bool {
	saved := ev.ManagedFields
	if len(saved) == 0 {
		return false
	}
	for _, e := range saved {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			return false
		}
	}
	ev.ManagedFields = nil
	if ev.Size() <= limit {
		return true
	}
	ev.ManagedFields = saved
	return false
}

// apply serves a server-side apply (PATCH with application/apply-patch+yaml)
// as kube-apiserver does: the body is an applied configuration of the
// request's version, merged into the event (created when missing) by the
// field manager, which makes the fieldManager its owner of the fields it
// sets and refuses, with 409 and a cause per field, to change fields
// other managers own unless force is given. The result is validated and
// stored as any patch's.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	o, se := negotiateOutput(r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	opts, se := parseWriteOptions(rr.query, "PatchOptions", true)
	if se != nil {
		writeStatus(w, se)
		return
	}
	body, se := readBody(w, r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	applied := map[string]any{}
	if err := yaml.Unmarshal(body, &applied); err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err)))
		return
	}
	var warnings []string
	tryUpdate := func(cur *corev1.Event) (*corev1.Event, *apierrors.StatusError) {
		ev, err := s.fields.Apply(rr.version, cur, runtime.DeepCopyJSON(applied), opts.fieldManager, opts.force)
		if err != nil {
			return nil, applyError(err)
		}
		if opts.validation == validationStrict || opts.validation == validationWarn {
			if err := yaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
				if opts.validation == validationStrict {
					return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
				}
				warnings = []string{err.Error()}
			}
		}
		if se := checkNamespace(ev, rr.namespace); se != nil {
			return nil, se
		}
		if se := checkName(ev, rr.name); se != nil {
			return nil, se
		}
		if cur != nil && ev.ResourceVersion != cur.ResourceVersion {
			// The configuration names a revision: it must be current.
			if want, se := parseRevision(ev.ResourceVersion); se != nil || want != 0 {
				if se != nil {
					return nil, se
				}
				return nil, apierrors.NewConflict(rr.version.GroupResource(), rr.name, errors.New(registryOptimisticLockMsg))
			}
		}
		return ev, nil
	}
	ww := &warningWriter{ResponseWriter: w, warnings: &warnings}
	s.guaranteedUpdate(ww, r, rr, o, opts, 0, tryUpdate, true)
}

// applyError is the Status of an apply the field manager refused: its
// own Status errors (409 conflicts, 400 for a configuration of another
// version or kind, or one that sets managedFields) as they are; a
// configuration that does not fit the Event schema (a field it does not
// declare, a value of the wrong type) is a 400 with the field manager's
// message, where kube-apiserver answers 500.
func applyError(err error) *apierrors.StatusError {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	if strings.HasPrefix(err.Error(), "failed to create typed patch object") {
		return apierrors.NewBadRequest(err.Error())
	}
	return apierrors.NewInternalError(err)
}
