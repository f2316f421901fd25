package refdoc

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Kind is one configuration file kind a program reads.
type Kind struct {
	// Title is the section's heading, e.g. "RetentionConfiguration".
	Title string
	// Intro is Markdown written under the heading: which flag reads the
	// file, and anything the types cannot say.
	Intro string
	// APIVersion and Kind are what the file declares; both empty for a
	// type that is not a file of its own (it has no apiVersion and kind
	// rows then).
	APIVersion, Kind string
	// Package is the import path of the package declaring Type, within
	// the module.
	Package string
	// Type is the name of the Go type of the file's top-level object.
	Type string
}

// Configuration renders kinds as a Markdown page titled title: for each
// kind, a table per object of its fields (the JSON key, the type, the
// field's doc comment), nested objects each in a section of their own
// named by their path in the file. The types are read from the module's
// source rooted at moduleRoot; types of other modules are named, not
// expanded.
func Configuration(moduleRoot, title, intro, regenerate string, kinds []Kind) ([]byte, error) {
	modPath, err := modulePath(moduleRoot)
	if err != nil {
		return nil, err
	}
	r := &configRenderer{root: moduleRoot, module: modPath, pkgs: map[string]*srcPackage{}}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", title)
	header(&b, regenerate)
	if intro != "" {
		b.WriteString(strings.TrimSpace(intro) + "\n\n")
	}
	for _, k := range kinds {
		fmt.Fprintf(&b, "- [%s](#%s)\n", k.Title, Anchor(k.Title))
	}
	b.WriteString("\n")
	for _, k := range kinds {
		if err := r.kind(&b, k); err != nil {
			return nil, fmt.Errorf("refdoc: %s: %w", k.Title, err)
		}
	}
	return b.Bytes(), nil
}

// modulePath reads the module path from root's go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("refdoc: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`), nil
		}
	}
	return "", fmt.Errorf("refdoc: %s has no module line", filepath.Join(root, "go.mod"))
}

// configRenderer renders configuration kinds from parsed source.
type configRenderer struct {
	root, module string
	pkgs         map[string]*srcPackage
	// title is the kind being rendered, the first word of its sections'
	// headings.
	title string
}

// srcPackage is a parsed package: its type declarations, and each file's
// imports by local name.
type srcPackage struct {
	path  string
	types map[string]*typeDecl
	// consts are the values of the package's constants that constValue
	// can compute, as a reader would write them (10s, 4096).
	consts map[string]string
}

// typeDecl is one type declaration and the imports of its file.
type typeDecl struct {
	pkg     *srcPackage
	spec    *ast.TypeSpec
	doc     string
	imports map[string]string
}

// object is a struct to render as a section: where it is in the file and
// its declaration.
type object struct {
	path string
	decl *typeDecl
}

// row is one field of an object's table.
type row struct {
	key, typ, doc string
}

func (r *configRenderer) load(importPath string) (*srcPackage, error) {
	if p, ok := r.pkgs[importPath]; ok {
		return p, nil
	}
	rel, ok := strings.CutPrefix(importPath, r.module)
	if !ok {
		return nil, fmt.Errorf("package %s is not in module %s", importPath, r.module)
	}
	dir := filepath.Join(r.root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &srcPackage{path: importPath, types: map[string]*typeDecl{}, consts: map[string]string{}}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		imports := map[string]string{}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			name := ip[strings.LastIndex(ip, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = ip
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if v, ok := constValue(vs.Values[i]); ok {
								p.consts[n.Name] = v.String()
							}
						}
					}
				}
			}
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				doc := ts.Doc.Text()
				if doc == "" && len(g.Specs) == 1 {
					doc = g.Doc.Text()
				}
				p.types[ts.Name.Name] = &typeDecl{pkg: p, spec: ts, doc: doc, imports: imports}
			}
		}
	}
	r.pkgs[importPath] = p
	return p, nil
}

// lookup finds the declaration of type name in pkg, following aliases.
func (r *configRenderer) lookup(pkg, name string) (*typeDecl, error) {
	p, err := r.load(pkg)
	if err != nil {
		return nil, err
	}
	d, ok := p.types[name]
	if !ok {
		return nil, fmt.Errorf("no type %s in %s", name, pkg)
	}
	if d.spec.Assign.IsValid() {
		if target, ok := r.resolve(d, d.spec.Type); ok {
			return target, nil
		}
	}
	return d, nil
}

// resolve returns the declaration in this module that expr (in decl's
// file) names, if it does.
func (r *configRenderer) resolve(in *typeDecl, expr ast.Expr) (*typeDecl, bool) {
	switch e := expr.(type) {
	case *ast.Ident:
		if _, ok := in.pkg.types[e.Name]; ok {
			d, err := r.lookup(in.pkg.path, e.Name)
			return d, err == nil
		}
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, false
		}
		ip := in.imports[x.Name]
		if ip == r.module || strings.HasPrefix(ip, r.module+"/") {
			d, err := r.lookup(ip, e.Sel.Name)
			return d, err == nil
		}
	case *ast.StarExpr:
		return r.resolve(in, e.X)
	}
	return nil, false
}

func (r *configRenderer) kind(b *bytes.Buffer, k Kind) error {
	d, err := r.lookup(k.Package, k.Type)
	if err != nil {
		return err
	}
	r.title = k.Title
	fmt.Fprintf(b, "## %s\n\n", k.Title)
	if k.Intro != "" {
		b.WriteString(strings.TrimSpace(k.Intro) + "\n\n")
	}
	queue := []object{{path: "", decl: d}}
	seen := map[*typeDecl]string{}
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		heading := k.Title
		if o.path != "" {
			heading = k.Title + " " + o.path
			fmt.Fprintf(b, "### %s `%s`\n\n", k.Title, o.path)
		}
		if first, ok := seen[o.decl]; ok {
			fmt.Fprintf(b, "As [%s](#%s).\n\n", first, Anchor(first))
			continue
		}
		seen[o.decl] = heading
		if doc := docText(o.decl.doc); doc != "" {
			b.WriteString(doc + "\n\n")
		}
		var rows []row
		if o.path == "" && k.Kind != "" {
			rows = append(rows,
				row{"apiVersion", "string", "`" + k.APIVersion + "`. Required."},
				row{"kind", "string", "`" + k.Kind + "`. Required."})
		}
		nested, err := r.fields(o.decl, o.path, &rows)
		if err != nil {
			return err
		}
		b.WriteString("| field | type | |\n|---|---|---|\n")
		for _, rw := range rows {
			fmt.Fprintf(b, "| `%s` | %s | %s |\n", rw.key, rw.typ, cell(rw.doc))
		}
		b.WriteString("\n")
		queue = append(queue, nested...)
	}
	return nil
}

// fields appends decl's fields (those of inlined embedded structs in
// their place) to rows and returns the objects they hold, to be rendered
// after it.
func (r *configRenderer) fields(decl *typeDecl, path string, rows *[]row) ([]object, error) {
	st, ok := decl.spec.Type.(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("%s.%s is not a struct", decl.pkg.path, decl.spec.Name.Name)
	}
	var nested []object
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s).Get("json")
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (len(f.Names) > 0 && !f.Names[0].IsExported()) {
			continue
		}
		if len(f.Names) == 0 && name == "" {
			// Embedded and inlined: TypeMeta's apiVersion and kind are
			// written by the caller; another struct's fields are this
			// one's.
			if sel, ok := f.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "TypeMeta" {
				continue
			}
			inner, ok := r.resolve(decl, f.Type)
			if !ok {
				return nil, fmt.Errorf("%s.%s: cannot inline %s", decl.pkg.path, decl.spec.Name.Name, exprString(f.Type))
			}
			n, err := r.fields(inner, path, rows)
			if err != nil {
				return nil, err
			}
			nested = append(nested, n...)
			continue
		}
		if name == "" {
			name = f.Names[0].Name
		}
		childPath := path + "." + name
		if path == "" {
			childPath = name
		}
		typ, obj := r.typeName(decl, f.Type, childPath)
		if obj != nil {
			nested = append(nested, *obj)
		}
		*rows = append(*rows, row{key: name, typ: typ, doc: r.withValues(decl, docText(f.Doc.Text()))})
	}
	return nested, nil
}

// typeName describes expr (a field's type in decl's file) for a reader of
// the file, and returns the object to render when it is a struct of this
// module, linked from the description.
func (r *configRenderer) typeName(decl *typeDecl, expr ast.Expr, path string) (string, *object) {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return r.typeName(decl, e.X, path)
	case *ast.ArrayType:
		elem, obj := r.typeName(decl, e.Elt, path+"[]")
		return "list of " + elem, obj
	case *ast.MapType:
		k, _ := r.typeName(decl, e.Key, path)
		v, obj := r.typeName(decl, e.Value, path+"[*]")
		return "map of " + k + " to " + v, obj
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "metav1" && e.Sel.Name == "Duration" {
			return "duration", nil
		}
	case *ast.Ident:
		switch e.Name {
		case "string", "bool":
			return e.Name, nil
		case "int", "int32", "int64", "uint", "uint32", "uint64":
			return "integer", nil
		case "float32", "float64":
			return "number", nil
		}
	}
	d, ok := r.resolve(decl, expr)
	if !ok {
		return "`" + exprString(expr) + "`", nil
	}
	if _, isStruct := d.spec.Type.(*ast.StructType); !isStruct {
		// A named scalar (LimitType string): its underlying type.
		return r.typeName(d, d.spec.Type, path)
	}
	return fmt.Sprintf("[object](#%s)", Anchor(r.title+" "+path)), &object{path: path, decl: d}
}

// docText is a doc comment on one line.
func docText(doc string) string {
	return strings.Join(strings.Fields(doc), " ")
}

// exprString prints a type expression.
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.MapType:
		return "map[" + exprString(e.Key) + "]" + exprString(e.Value)
	}
	return fmt.Sprintf("%T", e)
}

// constRefRE matches a reference to a constant in a doc comment, Name or
// pkg.Name, and whether a parenthesis follows it.
var constRefRE = regexp.MustCompile(`\b(?:([a-z][a-z0-9]*)\.)?([A-Z][A-Za-z0-9]*)\b( ?\()?`)

// withValues writes the value of each constant of this module that doc
// (a comment in decl's file) names without giving it: "Default
// DefaultTimeout." becomes "Default DefaultTimeout (10s).".
func (r *configRenderer) withValues(decl *typeDecl, doc string) string {
	return constRefRE.ReplaceAllStringFunc(doc, func(ref string) string {
		m := constRefRE.FindStringSubmatch(ref)
		if m[3] != "" {
			return ref
		}
		pkg := decl.pkg
		if m[1] != "" {
			ip, ok := decl.imports[m[1]]
			if !ok || !strings.HasPrefix(ip, r.module) {
				return ref
			}
			p, err := r.load(ip)
			if err != nil {
				return ref
			}
			pkg = p
		}
		if v, ok := pkg.consts[m[2]]; ok {
			return ref + " (" + v + ")"
		}
		return ref
	})
}

// value is a constant's value: an integer, or a duration.
type value struct {
	n        int64
	duration bool
}

// String writes v as a reader would: 4096, 10s.
func (v value) String() string {
	if v.duration {
		return time.Duration(v.n).String()
	}
	return strconv.FormatInt(v.n, 10)
}

// durations are the time package's units.
var durations = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// constValue computes a constant expression of integers and the time
// package's units with *, << and +; ok is false for anything else.
func constValue(e ast.Expr) (value, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT {
			return value{}, false
		}
		n, err := strconv.ParseInt(e.Value, 0, 64)
		return value{n: n}, err == nil
	case *ast.ParenExpr:
		return constValue(e.X)
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "time" {
			if d, ok := durations[e.Sel.Name]; ok {
				return value{n: int64(d), duration: true}, true
			}
		}
	case *ast.BinaryExpr:
		a, okA := constValue(e.X)
		b, okB := constValue(e.Y)
		if !okA || !okB {
			return value{}, false
		}
		dur := a.duration || b.duration
		switch e.Op {
		case token.MUL:
			return value{n: a.n * b.n, duration: dur}, true
		case token.ADD:
			return value{n: a.n + b.n, duration: dur}, true
		case token.SHL:
			if !dur && b.n >= 0 && b.n < 63 {
				return value{n: a.n << b.n}, true
			}
		}
	}
	return value{}, false
}
