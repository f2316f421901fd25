package clusterview

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Names are the clusters a rule of a configuration file applies to (the
// clusters of a retention rule, of an export filter): each a fleet
// cluster's name (ValidName), or "" for the root cluster (the events
// written to eventsd itself, or mirrored from its only source), as
// storage.ClusterNamespace and ABAC's cluster field name it. An empty
// list matches every cluster, the root included.
type Names []string

// Matches reports whether cluster c ("" the root) is one of n, or n is
// empty.
func (n Names) Matches(c string) bool {
	return len(n) == 0 || slices.Contains(n, c)
}

// Validate returns n's errors under path (a configuration file's
// "clusters" field): each name valid, none twice.
func (n Names) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]int, len(n))
	for i, c := range n {
		p := path.Index(i)
		if c != "" {
			if why := ValidName(c); why != "" {
				errs = append(errs, field.Invalid(p, c, why+` (or "" for the root cluster)`))
				continue
			}
		}
		if prev, dup := seen[c]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%q (also [%d])", c, prev)))
			continue
		}
		seen[c] = i
	}
	return errs
}
