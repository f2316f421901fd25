package eventfilter

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/interpreter"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/eventapi/fieldmanager"
	corev1 "k8s.io/api/core/v1"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// VariableName is the name under which an expression sees the event.
const VariableName = "object"

const (
	// DefaultMaxExpressionLength bounds an expression's length in bytes.
	// A filter is typed in a search box or a command line: 4 KiB is far
	// beyond any such expression and keeps parsing and checking cheap
	// (CEL's own parser limit, 100,000 code points, is for stored
	// policies).
	DefaultMaxExpressionLength = 4096

	// DefaultEstimatedCostLimit bounds the estimated worst-case cost of
	// an expression on one event: above it the expression is refused at
	// Compile. It is the limit kube-apiserver puts on the estimated cost
	// of one CRD validation rule (apiextensions' StaticEstimatedCostLimit).
	// The estimate assumes every string as long as the largest request
	// (3 MiB), so it is far above the cost on actual events: with VAP's
	// 1,000,000 as the estimated limit, a regex of a dozen characters on
	// the message would be refused.
	DefaultEstimatedCostLimit = 10_000_000

	// DefaultPerEventCostLimit bounds the actual cost of one evaluation,
	// on one event. It is ValidatingAdmissionPolicy's per-call limit
	// (k8s.io/apiserver/pkg/apis/cel PerCallLimit): what kube-apiserver
	// lets one expression spend on one object, a few milliseconds of CPU.
	DefaultPerEventCostLimit = 1_000_000

	// DefaultRequestCostBudget bounds the actual cost summed over every
	// event one request (a list, or the initial events and changes of a
	// watch) evaluates. It is ten times ValidatingAdmissionPolicy's
	// per-request budget (RuntimeCELCostBudget, 10,000,000), since a list
	// evaluates one expression on many objects: at a typical filter's
	// 10 to 100 units an event, one to ten million events, a second or
	// two of CPU, well within the request timeout. A list past it is cut
	// with an error that says to narrow it with selectors.
	DefaultRequestCostBudget = 100_000_000
)

// Limits bound the cost of filters. Zero fields take their defaults.
type Limits struct {
	// MaxExpressionLength bounds an expression's length in bytes
	// (DefaultMaxExpressionLength).
	MaxExpressionLength int
	// EstimatedCostLimit bounds the estimated worst-case cost of one
	// evaluation (DefaultEstimatedCostLimit).
	EstimatedCostLimit uint64
	// PerEventCostLimit bounds the actual cost of one evaluation
	// (DefaultPerEventCostLimit).
	PerEventCostLimit uint64
	// RequestCostBudget bounds the actual cost summed over one Run
	// (DefaultRequestCostBudget).
	RequestCostBudget uint64
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxExpressionLength <= 0 {
		l.MaxExpressionLength = DefaultMaxExpressionLength
	}
	if l.EstimatedCostLimit == 0 {
		l.EstimatedCostLimit = DefaultEstimatedCostLimit
	}
	if l.PerEventCostLimit == 0 {
		l.PerEventCostLimit = DefaultPerEventCostLimit
	}
	if l.RequestCostBudget == 0 {
		l.RequestCostBudget = DefaultRequestCostBudget
	}
	return l
}

// ErrInvalid is wrapped by Compile's errors: the expression does not
// parse, does not type-check, is not a bool, or is too long or too
// dear. The message says which, with CEL's own message for the first
// three.
var ErrInvalid = errors.New("invalid filter")

// ErrCostExceeded is wrapped by the errors of an evaluation that reached
// a cost limit, on one event or over a Run.
var ErrCostExceeded = errors.New("filter exceeded its cost limit")

// Filter is a compiled filter. It is safe for concurrent use.
type Filter struct {
	expr    string
	version eventapi.Version
	schema  common.Schema // the shape's, shared (a cachedSchema)
	program cel.Program
	limits  Limits
	// estimate is the expression's estimated worst-case cost on one
	// event.
	estimate uint64
}

// Compiler compiles filters with one set of limits, over CEL
// environments it builds once (a few milliseconds each) for every shape.
// It is safe for concurrent use.
type Compiler struct {
	limits Limits
	envs   map[eventapi.Version]*env
}

// NewCompiler builds the environments of both shapes (core/v1 and
// events.k8s.io/v1) with limits, defaults applied to its zero fields.
func NewCompiler(limits Limits) (*Compiler, error) {
	c := &Compiler{limits: limits.WithDefaults(), envs: map[eventapi.Version]*env{}}
	for _, shape := range []eventapi.Version{eventapi.CoreV1, eventapi.EventsV1} {
		e, err := newEnv(shape)
		if err != nil {
			return nil, err
		}
		c.envs[shape] = e
	}
	return c, nil
}

// Compile compiles expr for events of version with limits: NewCompiler
// and Compiler.Compile, for a single use (a server keeps a Compiler).
func Compile(version eventapi.Version, expr string, limits Limits) (*Filter, error) {
	c, err := NewCompiler(limits)
	if err != nil {
		return nil, err
	}
	return c.Compile(version, expr)
}

// Compile compiles expr for events of version, refusing it (with an
// error wrapping ErrInvalid) when it does not compile, is not a bool, is
// longer than the limit or its estimated cost is over the limit.
func (c *Compiler) Compile(version eventapi.Version, expr string) (*Filter, error) {
	limits := c.limits
	if len(expr) > limits.MaxExpressionLength {
		return nil, fmt.Errorf("%w: the expression is %d bytes long, over the limit of %d", ErrInvalid, len(expr), limits.MaxExpressionLength)
	}
	e := c.envs[version.Shape()]
	if e == nil {
		return nil, fmt.Errorf("eventfilter: no environment for %s", version)
	}
	ast, issues := e.env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, issues.String())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("%w: the expression must evaluate to a bool, not %s", ErrInvalid, ast.OutputType())
	}
	estimator := &library.CostEstimator{SizeEstimator: &sizeEstimator{root: e.declType}}
	est, err := e.env.EstimateCost(ast, estimator)
	if err != nil {
		return nil, fmt.Errorf("%w: estimating its cost: %v", ErrInvalid, err)
	}
	if est.Max > limits.EstimatedCostLimit {
		return nil, fmt.Errorf("%w: its estimated cost on one event, %d, is over the limit of %d", ErrInvalid, est.Max, limits.EstimatedCostLimit)
	}
	prog, err := e.env.Program(ast,
		cel.CostLimit(limits.PerEventCostLimit),
		cel.CostTracking(estimator),
		cel.InterruptCheckFrequency(celCheckFrequency),
	)
	if err != nil {
		return nil, fmt.Errorf("eventfilter: building the program: %w", err)
	}
	return &Filter{expr: expr, version: version, schema: e.schema, program: prog, limits: limits, estimate: est.Max}, nil
}

// celCheckFrequency is how many comprehension iterations pass between
// checks of the context during an evaluation (kube-apiserver's
// CheckFrequency).
const celCheckFrequency = 100

// String returns the expression.
func (f *Filter) String() string { return f.expr }

// EstimatedCost returns the expression's estimated worst-case cost on one
// event.
func (f *Filter) EstimatedCost() uint64 { return f.estimate }

// Limits returns the limits f was compiled with, defaults set.
func (f *Filter) Limits() Limits { return f.limits }

// Matches evaluates f on ev, a stored (core/v1) event converted first to
// the shape of f's version. It fails, wrapping ErrCostExceeded, when the
// evaluation reaches the per-event cost limit.
func (f *Filter) Matches(ev *corev1.Event) (bool, error) {
	ok, _, err := f.Eval(context.Background(), ev)
	return ok, err
}

// Eval is Matches with a context, which interrupts a long evaluation,
// that also returns the evaluation's actual cost.
func (f *Filter) Eval(ctx context.Context, ev *corev1.Event) (bool, uint64, error) {
	if ctx.Err() != nil {
		// CEL checks the context only inside comprehensions.
		return false, 0, fmt.Errorf("filter on event %s/%s: %w", ev.Namespace, ev.Name, context.Cause(ctx))
	}
	var obj any = ev
	if f.version.Shape() == eventapi.EventsV1 {
		obj = eventapi.ToEventsV1(ev)
	}
	val := common.TypedToVal(obj, f.schema)
	out, det, err := f.program.ContextEval(ctx, map[string]any{VariableName: val})
	var cost uint64
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	if err != nil {
		var ce interpreter.EvalCancelledError
		if errors.As(err, &ce) && ce.Cause == interpreter.CostLimitExceeded {
			return false, cost, fmt.Errorf("%w on event %s/%s: its cost on one event is over the limit of %d", ErrCostExceeded, ev.Namespace, ev.Name, f.limits.PerEventCostLimit)
		}
		if ctx.Err() != nil {
			return false, cost, fmt.Errorf("filter on event %s/%s: %w", ev.Namespace, ev.Name, context.Cause(ctx))
		}
		// A runtime error (a missing field, a bad regex, a division by
		// zero) means the event is not selected, as a field selector on
		// an absent field does not select it.
		return false, cost, nil
	}
	b, ok := out.Value().(bool)
	return ok && b, cost, nil
}

// env is the CEL environment of one shape.
type env struct {
	env *cel.Env
	// schema is the shape's schema for common.TypedToVal, kept across
	// evaluations (cachedSchema).
	schema   common.Schema
	declType *apiservercel.DeclType
}

const refPrefix = "#/components/schemas/"

func newEnv(shape eventapi.Version) (*env, error) {
	schemas, err := fieldmanager.Schemas()
	if err != nil {
		return nil, fmt.Errorf("eventfilter: %w", err)
	}
	root := "io.k8s.api.core.v1.Event"
	if shape == eventapi.EventsV1 {
		root = "io.k8s.api.events.v1.Event"
	}
	s, err := resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
		if len(ref) > len(refPrefix) && ref[:len(refPrefix)] == refPrefix {
			ref = ref[len(refPrefix):]
		}
		sc, ok := schemas[ref]
		return sc, ok
	}, refPrefix+root)
	if err != nil {
		return nil, fmt.Errorf("eventfilter: resolving the schema of %s: %w", root, err)
	}
	declType := common.SchemaDeclType(&openapi.Schema{Schema: s}, false)
	if declType == nil {
		return nil, fmt.Errorf("eventfilter: no CEL type for %s", root)
	}
	declType = declType.MaybeAssignTypeName(root)
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: environment.DefaultCompatibilityVersion(),
		EnvOptions:        []cel.EnvOption{cel.Variable(VariableName, declType.CelType())},
		DeclTypes:         []*apiservercel.DeclType{declType},
	})
	if err != nil {
		return nil, fmt.Errorf("eventfilter: building the CEL environment: %w", err)
	}
	ce, err := set.Env(environment.NewExpressions)
	if err != nil {
		return nil, fmt.Errorf("eventfilter: building the CEL environment: %w", err)
	}
	return &env{env: ce, schema: newCachedSchema(&openapi.Schema{Schema: s}), declType: declType}, nil
}

// sizeEstimator bounds the sizes of `object`'s strings, lists and maps
// from its declared type, whose bounds SchemaDeclType derives from the
// schema (or, where it has none, from the largest request), as
// kube-apiserver's CRD validation rules do.
type sizeEstimator struct {
	root *apiservercel.DeclType
}

// EstimateSize implements checker.CostEstimator.
func (c *sizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 || path[0] != VariableName {
		return nil
	}
	t := c.root
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			t = t.ElemType
		case "@keys":
			t = t.KeyType
		default:
			f, ok := t.Fields[name]
			if !ok {
				return nil
			}
			t = f.Type
		}
		if t == nil {
			return nil
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(t.MaxElements)}
}

// EstimateCallCost implements checker.CostEstimator: calls are the
// library estimator's.
func (c *sizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}
