package robustness

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model of the event store. A history is checked in
// partitions, each with porcupine on its own:
//
//   - one per key (namespace/name): its operations (creates, updates and
//     patches with their preconditions, deletes, gets, expiries) against a
//     sequential key: whether it exists, the revision and content of its
//     last write, and the revision of its last write ever (a later write
//     must get a higher one);
//   - one for the store-wide revision: every write whose revision is
//     known must get a revision above that of every write and read
//     linearized before it; a consistent list (no resourceVersion, 0 or
//     NotOlderThan) is a read of the whole store at its revision, and a
//     get of a key at revision r is a read at some revision from r to just
//     before the key's next change.
//
// Together they say that a total order of the operations exists that
// respects real time, in which every read sees exactly the writes before
// it: a get or a list that misses a write acknowledged before it started,
// or sees one before it was made, a write acknowledged with a revision
// below one already read, or a precondition judged against a stale state
// all fail a partition. What a list returns at its revision is checked
// against the change log (CheckLists).
//
// An operation whose outcome the client could not know (no answer, a
// timeout) is resolved through the change log: a create, update or patch
// is applied iff some change carries its message (unique per write), and
// then with that change's revision; a delete may or may not have been
// applied. Such operations never returned: they may take effect at any
// time after their call.

// keyState is the model of one key. Comparable: porcupine compares states
// with ==.
type keyState struct {
	exists  bool
	rev     int64
	msg     string
	lastRev int64
}

// keyInput is an operation of one key's partition.
type keyInput struct {
	op *Op
	// rev is the revision of a write (resolved for an unknown outcome),
	// or of a get's object; outcome is the (resolved) outcome.
	rev     int64
	outcome Outcome
}

// revInput is an operation of the revision partition: a write at rev, or
// a read at some revision in [lo, hi].
type revInput struct {
	op     *Op
	write  bool
	rev    int64
	lo, hi int64
}

func keyStep(s keyState, in keyInput) []keyState {
	o := in.op
	none := []keyState(nil)
	switch o.Kind {
	case Create:
		switch in.outcome {
		case OK:
			if !s.exists && in.rev > s.lastRev {
				return []keyState{{true, in.rev, o.Msg, in.rev}}
			}
		case Exists:
			if s.exists {
				return []keyState{s}
			}
		}
	case Update, Patch:
		preOK := o.PreRev == 0 || o.PreRev == s.rev
		// A PUT of a missing event creates it, whatever resourceVersion
		// it names (events' AllowCreateOnUpdate, as kube-apiserver); a
		// patch of a missing event is NotFound.
		create := o.Kind == Update && !s.exists
		switch in.outcome {
		case OK:
			if (s.exists && preOK || create) && in.rev > s.lastRev {
				return []keyState{{true, in.rev, o.Msg, in.rev}}
			}
		case Conflict:
			if s.exists && !preOK {
				return []keyState{s}
			}
		case NotFound:
			if !s.exists && o.Kind == Patch {
				return []keyState{s}
			}
		}
	case Delete:
		preOK := o.PreRev == 0 || o.PreRev == s.rev
		gone := keyState{lastRev: s.lastRev}
		switch in.outcome {
		case OK:
			if s.exists && preOK {
				return []keyState{gone}
			}
		case Conflict:
			if s.exists && !preOK {
				return []keyState{s}
			}
		case NotFound:
			if !s.exists {
				return []keyState{s}
			}
		case Unknown:
			if s.exists && preOK {
				return []keyState{s, gone}
			}
			return []keyState{s}
		}
	case Expire:
		if s.exists && in.rev > s.lastRev {
			return []keyState{{lastRev: in.rev}}
		}
	case Get:
		switch in.outcome {
		case OK:
			if s.exists && s.rev == in.rev && s.msg == o.Got.Msg {
				return []keyState{s}
			}
		case NotFound:
			if !s.exists {
				return []keyState{s}
			}
		}
	}
	return none
}

func revStep(s int64, in revInput) []int64 {
	if in.write {
		if in.rev > s {
			return []int64{in.rev}
		}
		return nil
	}
	if s <= in.hi {
		return []int64{max(s, in.lo)}
	}
	return nil
}

// model is the nondeterministic model both partitions share: the state
// and input types tell them apart.
var model = porcupine.NondeterministicModel{
	Init: func() []any { return []any{nil} },
	Step: func(state, input, _ any) []any {
		var out []any
		switch in := input.(type) {
		case keyInput:
			s, _ := state.(keyState)
			for _, n := range keyStep(s, in) {
				out = append(out, n)
			}
		case revInput:
			s, _ := state.(int64)
			for _, n := range revStep(s, in) {
				out = append(out, n)
			}
		}
		return out
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, _ any) string {
		switch in := input.(type) {
		case keyInput:
			return in.op.String()
		case revInput:
			if in.write {
				return fmt.Sprintf("write rev %d (%s)", in.rev, in.op)
			}
			return fmt.Sprintf("read rev in [%d, %d] (%s)", in.lo, in.hi, in.op)
		}
		return fmt.Sprint(input)
	},
}

// Partition is one partition of a history for the linearizability check.
type Partition struct {
	Name string
	Ops  []porcupine.Operation
}

// Partitions splits h into the model's partitions, resolving unknown
// outcomes through l; ops left out (reads and writes that certainly did
// nothing) are not in any partition.
func Partitions(h History, l *ChangeLog) []Partition {
	keys := map[string][]porcupine.Operation{}
	var order []string
	var revs []porcupine.Operation
	addKey := func(o *Op, in keyInput, ret int64) {
		k := o.Namespace + "/" + o.Name
		if _, ok := keys[k]; !ok {
			order = append(order, k)
		}
		keys[k] = append(keys[k], porcupine.Operation{ClientId: o.Client, Input: in, Call: o.Call, Return: ret})
	}
	addRev := func(o *Op, in revInput, ret int64) {
		revs = append(revs, porcupine.Operation{ClientId: o.Client, Input: in, Call: o.Call, Return: ret})
	}
	for _, o := range h.Ops {
		switch o.Kind {
		case Create, Update, Patch:
			rev, outcome, ret := o.Rev, o.Outcome, o.Return
			if outcome == Unknown {
				c, ok := l.FindMsg(o.Namespace, o.Msg)
				if !ok || c.Name != o.Name {
					continue // not applied
				}
				rev, outcome, ret = c.Rev, OK, Never
			}
			if outcome == Failed || outcome == Unknown {
				continue
			}
			addKey(o, keyInput{op: o, rev: rev, outcome: outcome}, ret)
			if outcome == OK {
				addRev(o, revInput{op: o, write: true, rev: rev}, ret)
			}
		case Delete:
			if o.Outcome == Failed {
				continue
			}
			ret := o.Return
			if o.Outcome == Unknown {
				ret = Never
			}
			addKey(o, keyInput{op: o, outcome: o.Outcome}, ret)
		case Expire:
			addKey(o, keyInput{op: o, rev: o.Rev, outcome: OK}, o.Return)
			addRev(o, revInput{op: o, write: true, rev: o.Rev}, o.Return)
		case Get:
			if o.Outcome != OK && o.Outcome != NotFound {
				continue
			}
			addKey(o, keyInput{op: o, rev: o.Rev, outcome: o.Outcome}, o.Return)
			if o.Outcome == OK {
				hi := l.NextChange(o.Namespace, o.Name, o.Rev) - 1
				if hi < 0 {
					hi = Never
				}
				addRev(o, revInput{op: o, lo: o.Rev, hi: hi}, o.Return)
			}
		case List:
			if o.Outcome != OK || o.List.Match == "Exact" {
				continue
			}
			addRev(o, revInput{op: o, lo: o.Rev, hi: o.Rev}, o.Return)
		}
	}
	parts := make([]Partition, 0, len(order)+1)
	for _, k := range order {
		parts = append(parts, Partition{Name: "key " + k, Ops: keys[k]})
	}
	return append(parts, Partition{Name: "revisions", Ops: revs})
}

// LinearizabilityResult is what CheckLinearizable found.
type LinearizabilityResult struct {
	// Checked is the number of operations checked (in some partition).
	Checked int
	// Violations name the partitions that are not linearizable.
	Violations []Violation
	// TimedOut names the partitions porcupine could not decide in time.
	TimedOut []string
}

// CheckLinearizable checks every partition of h with porcupine, each
// within timeout.
func CheckLinearizable(h History, l *ChangeLog, timeout time.Duration) LinearizabilityResult {
	var res LinearizabilityResult
	m := model.ToModel()
	counted := map[*Op]bool{}
	for _, p := range Partitions(h, l) {
		for _, op := range p.Ops {
			switch in := op.Input.(type) {
			case keyInput:
				counted[in.op] = true
			case revInput:
				counted[in.op] = true
			}
		}
		switch porcupine.CheckOperationsTimeout(m, p.Ops, timeout) {
		case porcupine.Ok:
		case porcupine.Illegal:
			res.Violations = append(res.Violations, Violation{"linearizable", fmt.Sprintf("%s is not linearizable; its operations:\n%s", p.Name, describe(p.Ops))})
		default:
			res.TimedOut = append(res.TimedOut, p.Name)
		}
	}
	res.Checked = len(counted)
	return res
}

// describe lists a partition's operations by call time (at most 60).
func describe(ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(min(max(a.Call-b.Call, -1), 1)) })
	var b strings.Builder
	for i, op := range ops {
		if i == 60 {
			fmt.Fprintf(&b, "  ... %d more\n", len(ops)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", model.DescribeOperation(op.Input, nil))
	}
	return b.String()
}
