package wrap

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// Karmada's interpreter scripts are Lua; Flotilla's rules are CEL. A script
// is converted only when its syntax tree (gopher-lua's parser, the one
// Karmada runs the scripts with) is made of what this file can evaluate
// symbolically: assignments of object fields, literals and tables, if/else,
// comparisons, and/or/not, returns, and Karmada's kube library helpers that
// have a Flotilla equivalent. The evaluation carries each branch to its
// return, so the result is one CEL expression with Lua's meaning:
//
//   - a field read `obj.a.b` fails, as in Lua, when `obj.a` is missing, and
//     is nil when only `b` is: `x == nil` becomes `!has(x)`, `x == "v"`
//     becomes `(has(x) && x == "v")`, `x == y` compares optionals;
//   - a table field set to nil is absent: status maps use CEL's optional
//     entries (`?"k": object.status.?k`);
//   - `<`, `>` on a missing field fail in both languages (Unknown health).
//
// CEL's && and || are commutative: where Lua would fail on a missing field
// in the first operand and the second decides, CEL decides. Everything
// else (loops, string functions, helper functions, arithmetic) is reported,
// never guessed.

// errNotConvertible is wrapped by every reason a script is left out.
var errNotConvertible = errors.New("not convertible")

func notConvertible(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errNotConvertible}, args...)...)
}

// luaFunction parses script and returns the parameters and body of the
// top-level function name. The only other top-level statement allowed is
// `local kube = require("kube")`.
func luaFunction(script, name string) ([]string, []ast.Stmt, error) {
	chunk, err := parse.Parse(strings.NewReader(script), name)
	if err != nil {
		return nil, nil, notConvertible("Lua does not parse: %v", firstLine(err.Error()))
	}
	var params []string
	var body []ast.Stmt
	found := false
	for _, st := range chunk {
		switch s := st.(type) {
		case *ast.FuncDefStmt:
			if id, ok := s.Name.Func.(*ast.IdentExpr); ok && id.Value == name && s.Name.Receiver == nil && !found {
				found = true
				params, body = s.Func.ParList.Names, s.Func.Stmts
				continue
			}
			return nil, nil, notConvertible("defines helper functions")
		case *ast.LocalAssignStmt:
			if isRequireKube(s) {
				continue
			}
			return nil, nil, notConvertible("has top-level locals (%s)", strings.Join(s.Names, ", "))
		default:
			return nil, nil, notConvertible("has top-level statements besides function %s", name)
		}
	}
	if !found {
		return nil, nil, notConvertible("defines no function %s", name)
	}
	return params, body, nil
}

func isRequireKube(s *ast.LocalAssignStmt) bool {
	if len(s.Names) != 1 || len(s.Exprs) != 1 {
		return false
	}
	call, ok := s.Exprs[0].(*ast.FuncCallExpr)
	if !ok || len(call.Args) != 1 {
		return false
	}
	fn, ok := call.Func.(*ast.IdentExpr)
	arg, ok2 := call.Args[0].(*ast.StringExpr)
	return ok && ok2 && fn.Value == "require" && arg.Value == "kube"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// valKind is what a Lua value is known to be.
type valKind int

const (
	vNil         valKind = iota // nil for sure
	vObject                     // the function's object parameter
	vPath                       // a field of the object (nil when absent)
	vLit                        // a number or string literal
	vBool                       // a boolean CEL expression
	vExpr                       // another CEL expression, never nil
	vTable                      // a table the script built
	vParam                      // another parameter (ReviseReplica's count)
	vPodTemplate                // kube.accuratePodRequirements(template)
	vPodDeps                    // kube.getPodDependencies(template, ns)
)

type val struct {
	kind  valKind
	path  []string // vPath; for vPodTemplate, vPodDeps: the template
	cel   string   // vLit, vBool, vExpr: CEL text
	table *luaTable
	// tmpl is the pod template built as a table (vPodTemplate of a table).
	tmpl *luaTable
	// strict is, for vPath, one more than the number of leading fields
	// read as Lua reads them (failing when missing); the rest are read as
	// optionals. 0 means all but the last are strict.
	strict int
	// guard is, for a vBool that tests a field's presence (`x ~= nil`,
	// `x == nil`), that field; present says which of the two.
	guard   []string
	present bool
	// dynTyped says a vExpr is already dyn (it may yield a field).
	dynTyped bool
}

// luaTable is an immutable table with string keys in insertion order.
type luaTable struct {
	keys []string
	vals map[string]val
}

func (t *luaTable) with(key string, v val) *luaTable {
	out := &luaTable{vals: make(map[string]val, len(t.vals)+1)}
	for _, k := range t.keys {
		if k != key {
			out.keys = append(out.keys, k)
			out.vals[k] = t.vals[k]
		}
	}
	if v.kind != vNil {
		out.keys = append(out.keys, key)
		out.vals[key] = v
	}
	return out
}

func (t *luaTable) get(key string) val {
	if v, ok := t.vals[key]; ok {
		return v
	}
	return val{kind: vNil}
}

var (
	celTrue  = val{kind: vBool, cel: "true"}
	celFalse = val{kind: vBool, cel: "false"}
)

// luaEval evaluates one function body symbolically.
type luaEval struct {
	object string // the object parameter's name
	// notes collect what was dropped on purpose (Karmada-only annotations).
	notes []string
	// steps bound the work: each branch is followed to its return.
	steps int
}

type luaEnv map[string]val

func (e luaEnv) copy() luaEnv {
	out := make(luaEnv, len(e))
	for k, v := range e {
		out[k] = v
	}
	return out
}

const maxEvalSteps = 2000

// block evaluates stmts to the values the function returns.
func (ev *luaEval) block(stmts []ast.Stmt, env luaEnv) ([]val, error) {
	for i, st := range stmts {
		ev.steps++
		if ev.steps > maxEvalSteps {
			return nil, notConvertible("too many branches")
		}
		switch s := st.(type) {
		case *ast.LocalAssignStmt:
			if len(s.Names) != len(s.Exprs) {
				return nil, notConvertible("assigns several values at once")
			}
			for j, name := range s.Names {
				v, err := ev.eval(s.Exprs[j], env)
				if err != nil {
					return nil, err
				}
				env[name] = v
			}
		case *ast.AssignStmt:
			if len(s.Lhs) != 1 || len(s.Rhs) != 1 {
				return nil, notConvertible("assigns several values at once")
			}
			v, err := ev.eval(s.Rhs[0], env)
			if err != nil {
				return nil, err
			}
			if err := ev.assign(s.Lhs[0], v, env); err != nil {
				return nil, err
			}
		case *ast.IfStmt:
			cond, err := ev.eval(s.Condition, env)
			if err != nil {
				return nil, err
			}
			c := truthy(cond)
			rest := stmts[i+1:]
			switch c.cel {
			case "true":
				return ev.block(concat(s.Then, rest), env)
			case "false":
				return ev.block(concat(s.Else, rest), env)
			}
			thenVals, err := ev.block(concat(s.Then, rest), env.copy())
			if err != nil {
				return nil, err
			}
			elseVals, err := ev.block(concat(s.Else, rest), env.copy())
			if err != nil {
				return nil, err
			}
			return ternaryVals(c, thenVals, elseVals)
		case *ast.ReturnStmt:
			out := make([]val, 0, len(s.Exprs))
			for _, x := range s.Exprs {
				v, err := ev.eval(x, env)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		case *ast.NumberForStmt, *ast.GenericForStmt, *ast.WhileStmt, *ast.RepeatStmt:
			return nil, notConvertible("loops")
		case *ast.FuncCallStmt:
			return nil, notConvertible("calls functions for their effect")
		default:
			return nil, notConvertible("has a %T", st)
		}
	}
	return nil, nil
}

func concat(a, b []ast.Stmt) []ast.Stmt {
	return append(append(make([]ast.Stmt, 0, len(a)+len(b)), a...), b...)
}

// assign handles `name = v` and `t.k.l = v` on a table the script built.
func (ev *luaEval) assign(lhs ast.Expr, v val, env luaEnv) error {
	if id, ok := lhs.(*ast.IdentExpr); ok {
		env[id.Value] = v
		return nil
	}
	var keys []string
	x := lhs
	for {
		get, ok := x.(*ast.AttrGetExpr)
		if !ok {
			break
		}
		k, ok := get.Key.(*ast.StringExpr)
		if !ok {
			return notConvertible("sets a computed key")
		}
		keys = append([]string{k.Value}, keys...)
		x = get.Object
	}
	id, ok := x.(*ast.IdentExpr)
	if !ok || len(keys) == 0 {
		return notConvertible("assigns to an expression")
	}
	root, ok := env[id.Value]
	if !ok || root.kind != vTable {
		return notConvertible("modifies %s, which is not a table the script built", id.Value)
	}
	t, err := setIn(root.table, keys, v)
	if err != nil {
		return err
	}
	env[id.Value] = val{kind: vTable, table: t}
	return nil
}

func setIn(t *luaTable, keys []string, v val) (*luaTable, error) {
	if len(keys) == 1 {
		return t.with(keys[0], v), nil
	}
	inner := t.get(keys[0])
	if inner.kind != vTable {
		return nil, notConvertible("sets a field of a non-table")
	}
	nt, err := setIn(inner.table, keys[1:], v)
	if err != nil {
		return nil, err
	}
	return t.with(keys[0], val{kind: vTable, table: nt}), nil
}

// karmadaGenerationAnnotation is set by Karmada on members' copies so its
// status aggregation can tell stale statuses; Flotilla never sets it.
const karmadaGenerationAnnotation = "resourcetemplate.karmada.io/generation"

func (ev *luaEval) eval(x ast.Expr, env luaEnv) (val, error) {
	switch e := x.(type) {
	case *ast.NilExpr:
		return val{kind: vNil}, nil
	case *ast.TrueExpr:
		return celTrue, nil
	case *ast.FalseExpr:
		return celFalse, nil
	case *ast.NumberExpr:
		f, err := strconv.ParseFloat(e.Value, 64)
		if err != nil {
			return val{}, notConvertible("has number %s", e.Value)
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return val{kind: vLit, cel: strconv.FormatInt(int64(f), 10)}, nil
		}
		return val{kind: vLit, cel: strconv.FormatFloat(f, 'g', -1, 64)}, nil
	case *ast.StringExpr:
		return val{kind: vLit, cel: strconv.Quote(e.Value)}, nil
	case *ast.IdentExpr:
		v, ok := env[e.Value]
		if !ok {
			return val{}, notConvertible("reads %s, which it never set", e.Value)
		}
		return v, nil
	case *ast.AttrGetExpr:
		obj, err := ev.eval(e.Object, env)
		if err != nil {
			return val{}, err
		}
		k, ok := e.Key.(*ast.StringExpr)
		if !ok {
			return val{}, notConvertible("reads a computed key")
		}
		switch obj.kind {
		case vObject:
			return val{kind: vPath, path: []string{k.Value}}, nil
		case vPath:
			if k.Value == karmadaGenerationAnnotation {
				ev.notes = append(ev.notes, fmt.Sprintf("reads the %s annotation, which Flotilla members never carry: that part is left out", karmadaGenerationAnnotation))
				return val{kind: vNil}, nil
			}
			return val{kind: vPath, path: append(append([]string{}, obj.path...), k.Value)}, nil
		case vTable:
			return obj.table.get(k.Value), nil
		}
		return val{}, notConvertible("indexes a value that is not a table")
	case *ast.TableExpr:
		t := &luaTable{vals: map[string]val{}}
		for _, f := range e.Fields {
			k, ok := f.Key.(*ast.StringExpr)
			if !ok {
				return val{}, notConvertible("builds a list")
			}
			v, err := ev.eval(f.Value, env)
			if err != nil {
				return val{}, err
			}
			t = t.with(k.Value, v)
		}
		return val{kind: vTable, table: t}, nil
	case *ast.FuncCallExpr:
		return ev.call(e, env)
	case *ast.LogicalOpExpr:
		l, r, err := ev.evalPair(e.Lhs, e.Rhs, env)
		if err != nil {
			return val{}, err
		}
		return logical(e.Operator, l, r)
	case *ast.RelationalOpExpr:
		l, r, err := ev.evalPair(e.Lhs, e.Rhs, env)
		if err != nil {
			return val{}, err
		}
		return relational(e.Operator, l, r)
	case *ast.UnaryNotOpExpr:
		v, err := ev.eval(e.Expr, env)
		if err != nil {
			return val{}, err
		}
		return not(truthy(v)), nil
	}
	return val{}, notConvertible("uses %s", exprName(x))
}

func exprName(x ast.Expr) string {
	switch x.(type) {
	case *ast.ArithmeticOpExpr, *ast.UnaryMinusOpExpr:
		return "arithmetic"
	case *ast.StringConcatOpExpr:
		return "string concatenation"
	case *ast.UnaryLenOpExpr:
		return "the length operator"
	case *ast.FunctionExpr:
		return "function literals"
	}
	return fmt.Sprintf("%T", x)
}

// evalPair evaluates a binary operator's operands, left first.
func (ev *luaEval) evalPair(lhs, rhs ast.Expr, env luaEnv) (val, val, error) {
	l, err := ev.eval(lhs, env)
	if err != nil {
		return val{}, val{}, err
	}
	r, err := ev.eval(rhs, env)
	if err != nil {
		return val{}, val{}, err
	}
	return l, r, nil
}

// call evaluates the Karmada kube library helpers Flotilla has an
// equivalent of, and tonumber of Karmada's own annotation (always nil on a
// Flotilla member).
func (ev *luaEval) call(e *ast.FuncCallExpr, env luaEnv) (val, error) {
	name := ""
	switch f := e.Func.(type) {
	case *ast.IdentExpr:
		name = f.Value
	case *ast.AttrGetExpr:
		obj, ok1 := f.Object.(*ast.IdentExpr)
		k, ok2 := f.Key.(*ast.StringExpr)
		if ok1 && ok2 && obj.Value == "kube" {
			name = "kube." + k.Value
		}
	}
	args := make([]val, 0, len(e.Args))
	for _, a := range e.Args {
		v, err := ev.eval(a, env)
		if err != nil {
			return val{}, err
		}
		args = append(args, v)
	}
	switch name {
	case "tonumber":
		if len(args) == 1 && args[0].kind == vNil {
			return args[0], nil
		}
	case "kube.accuratePodRequirements":
		if len(args) == 1 && args[0].kind == vPath {
			return val{kind: vPodTemplate, path: args[0].path}, nil
		}
		if len(args) == 1 && args[0].kind == vTable {
			return val{kind: vPodTemplate, tmpl: args[0].table}, nil
		}
	case "kube.getPodDependencies":
		if len(args) == 2 && args[0].kind == vPath && isNamespacePath(args[1]) {
			return val{kind: vPodDeps, path: args[0].path}, nil
		}
	}
	if name == "" {
		name = "a function"
	}
	return val{}, notConvertible("calls %s", name)
}

func isNamespacePath(v val) bool {
	return v.kind == vPath && len(v.path) == 2 && v.path[0] == "metadata" && v.path[1] == "namespace"
}

// truthy is Lua's truth test of v as a CEL boolean: nil and false are
// false, every other value true.
func truthy(v val) val {
	switch v.kind {
	case vBool:
		return v
	case vNil:
		return celFalse
	case vPath:
		return val{kind: vBool, cel: "(" + celHas(v.path) + " && " + celPath(v.path) + " != false)"}
	case vExpr:
		return val{kind: vBool, cel: "(" + v.cel + " != false)"}
	}
	return celTrue
}

func not(c val) val {
	switch c.cel {
	case "true":
		return celFalse
	case "false":
		return celTrue
	}
	out := val{kind: vBool, cel: "!" + paren(c.cel), guard: c.guard, present: !c.present}
	if strings.HasPrefix(c.cel, "!") && isAtom(c.cel[1:]) {
		out.cel = c.cel[1:]
	} else if m := comparison.FindStringSubmatch(c.cel); m != nil {
		out.cel = m[1] + " " + flipped[m[2]] + " " + m[3]
	}
	return out
}

// comparison is a single ordering of two atoms, negated by flipping it.
var comparison = regexp.MustCompile(`^([^ ()]+) (<|<=|>|>=) ([^ ()]+)$`)

var flipped = map[string]string{"<": ">=", "<=": ">", ">": "<=", ">=": "<"}

// logical is Lua's and/or: on booleans CEL's &&/||; `field or default`
// is the field when present.
func logical(op string, l, r val) (val, error) {
	if l.kind == vBool && r.kind == vBool || l.kind == vNil && r.kind == vBool || l.kind == vBool && r.kind == vNil {
		lc, rc := truthy(l), truthy(r)
		if op == "and" {
			return andVal(lc, rc), nil
		}
		return orVal(lc, rc), nil
	}
	if op == "or" {
		switch l.kind {
		case vNil:
			return r, nil
		case vTable, vLit, vPodDeps, vPodTemplate, vObject:
			return l, nil // always truthy
		case vPath:
			if r.kind == vLit || r.kind == vTable && len(r.table.keys) == 0 {
				return val{kind: vExpr, cel: celHas(l.path) + " ? " + celPath(l.path) + " : " + renderDyn(r), dynTyped: true}, nil
			}
		}
	}
	return val{}, notConvertible("uses %q on values that are not booleans", op)
}

func andVal(l, r val) val {
	switch {
	case l.cel == "false" || r.cel == "false":
		return celFalse
	case l.cel == "true":
		return r
	case r.cel == "true":
		return l
	}
	return val{kind: vBool, cel: paren(l.cel) + " && " + paren(r.cel)}
}

func orVal(l, r val) val {
	switch {
	case l.cel == "true" || r.cel == "true":
		return celTrue
	case l.cel == "false":
		return r
	case r.cel == "false":
		return l
	}
	return val{kind: vBool, cel: paren(l.cel) + " || " + paren(r.cel)}
}

// relational compares with Lua's nil semantics.
func relational(op string, l, r val) (val, error) {
	switch op {
	case "==", "~=":
		eq, err := equal(l, r)
		if err != nil {
			return val{}, err
		}
		if op == "~=" {
			return not(eq), nil
		}
		return eq, nil
	case "<", "<=", ">", ">=":
		if !numeric(l) || !numeric(r) {
			return val{}, notConvertible("orders values that are not numbers")
		}
		return val{kind: vBool, cel: renderPlain(l) + " " + op + " " + renderPlain(r)}, nil
	}
	return val{}, notConvertible("uses operator %s", op)
}

func numeric(v val) bool {
	return v.kind == vPath || v.kind == vExpr || v.kind == vLit && !strings.HasPrefix(v.cel, `"`)
}

func equal(l, r val) (val, error) {
	if l.kind == vNil && r.kind == vNil {
		return celTrue, nil
	}
	if r.kind == vNil {
		l, r = r, l
	}
	if l.kind == vNil {
		switch r.kind {
		case vPath:
			absent := not(val{kind: vBool, cel: celHas(r.path)})
			absent.guard, absent.present = r.path, false
			return absent, nil
		case vObject, vLit, vBool, vTable, vExpr:
			return celFalse, nil
		}
		return val{}, notConvertible("compares a helper's result with nil")
	}
	if r.kind == vPath && l.kind != vPath {
		l, r = r, l
	}
	switch {
	case l.kind == vPath && r.kind == vPath:
		return val{kind: vBool, cel: celOptPath(l.path) + " == " + celOptPath(r.path)}, nil
	case l.kind == vPath && (r.kind == vLit || r.kind == vBool || r.kind == vExpr):
		return val{kind: vBool, cel: "(" + celHas(l.path) + " && " + celPath(l.path) + " == " + renderPlain(r) + ")"}, nil
	case l.kind == vLit && r.kind == vLit:
		if l.cel == r.cel {
			return celTrue, nil
		}
		return celFalse, nil
	case (l.kind == vLit || l.kind == vBool || l.kind == vExpr) && (r.kind == vLit || r.kind == vBool || r.kind == vExpr):
		return val{kind: vBool, cel: paren(renderPlain(l)) + " == " + paren(renderPlain(r))}, nil
	}
	return val{}, notConvertible("compares tables or helpers' results")
}

// ternaryVals joins the two branches of an if into CEL conditionals.
func ternaryVals(c val, a, b []val) ([]val, error) {
	n := max(len(a), len(b))
	out := make([]val, n)
	for i := range n {
		x, y := val{kind: vNil}, val{kind: vNil}
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		v, err := ternary(c, x, y)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func ternary(c, a, b val) (val, error) {
	if a.kind == vBool && b.kind == vBool {
		switch {
		case a.cel == b.cel:
			return a, nil
		case a.cel == "true":
			return orVal(c, b), nil
		case a.cel == "false":
			return andVal(not(c), b), nil
		case b.cel == "true":
			return orVal(not(c), a), nil
		case b.cel == "false":
			return andVal(c, a), nil
		}
	}
	if a.kind == vNil && b.kind == vNil {
		return a, nil
	}
	if c.guard != nil && a.kind == vTable && b.kind == vTable {
		withField, without := a.table, b.table
		if !c.present {
			withField, without = without, withField
		}
		if t, ok := mergeGuarded(c.guard, withField, without); ok {
			return val{kind: vTable, table: t}, nil
		}
	}
	if (a.kind == vNil) != (b.kind == vNil) {
		// One branch returns nil (Karmada fails the call), the other a
		// value: CEL has no nil to return.
		return val{}, notConvertible("returns nil on some paths")
	}
	if a.kind == vPodTemplate || a.kind == vPodDeps || b.kind == vPodTemplate || b.kind == vPodDeps {
		if a.kind == b.kind && strings.Join(a.path, ".") == strings.Join(b.path, ".") && a.tmpl == nil && b.tmpl == nil {
			return a, nil
		}
		return val{}, notConvertible("chooses between kube helper results")
	}
	kind := vExpr
	if a.kind == vBool && b.kind == vBool {
		kind = vBool
	}
	as, err := render(a)
	if err != nil {
		return val{}, err
	}
	bs, err := render(b)
	if err != nil {
		return val{}, err
	}
	if as == bs {
		return a, nil
	}
	return val{kind: kind, cel: paren(c.cel) + " ? " + as + " : " + bs}, nil
}

// mergeGuarded joins the two tables of `if x == nil then return t end`
// (or `if x ~= nil then t.k = x.k end`) into one: when the table built
// with x present only adds fields read under x, reading those as
// optionals from x on gives the table of both branches.
func mergeGuarded(guard []string, withField, without *luaTable) (*luaTable, bool) {
	for _, k := range without.keys {
		w, ok := withField.vals[k]
		if !ok {
			return nil, false
		}
		ws, err1 := render(w)
		vs, err2 := render(without.vals[k])
		if err1 != nil || err2 != nil || ws != vs {
			return nil, false
		}
	}
	out := withField
	for _, k := range withField.keys {
		if _, ok := without.vals[k]; ok {
			continue
		}
		v := withField.vals[k]
		if v.kind != vPath || len(v.path) <= len(guard) || strings.Join(v.path[:len(guard)], "\x00") != strings.Join(guard, "\x00") {
			return nil, false
		}
		v.strict = len(guard) // fields from guard's last on are optional
		v.path = append([]string{}, v.path...)
		out = out.with(k, v)
	}
	// with() moved the changed keys to the end; keep the script's order.
	out.keys = withField.keys
	return out, true
}

// render is v as a CEL expression (tables as maps).
func render(v val) (string, error) {
	switch v.kind {
	case vTable:
		return renderTable(v.table)
	case vNil, vObject, vParam, vPodTemplate, vPodDeps:
		return "", notConvertible("returns a value CEL cannot express here")
	}
	return renderPlain(v), nil
}

func renderPlain(v val) string {
	if v.kind == vPath {
		return celPath(v.path)
	}
	if strings.Contains(v.cel, " ? ") {
		return "(" + v.cel + ")"
	}
	return v.cel
}

// renderDyn renders a map value: CEL's literals must be of one type, so
// every value is dyn.
func renderDyn(v val) string {
	if v.kind == vTable && len(v.table.keys) == 0 {
		return "{}"
	}
	s, _ := render(v)
	return s
}

func renderTable(t *luaTable) (string, error) {
	if len(t.keys) == 0 {
		return "{}", nil
	}
	parts := make([]string, 0, len(t.keys))
	for _, k := range t.keys {
		v := t.vals[k]
		switch v.kind {
		case vPath:
			parts = append(parts, "?"+strconv.Quote(k)+": "+celOptionalPath(v.path, v.strict))
		case vTable:
			s, err := renderTable(v.table)
			if err != nil {
				return "", err
			}
			parts = append(parts, strconv.Quote(k)+": "+s)
		case vExpr:
			if v.dynTyped {
				parts = append(parts, strconv.Quote(k)+": "+v.cel)
			} else {
				parts = append(parts, strconv.Quote(k)+": dyn("+v.cel+")")
			}
		case vLit, vBool:
			parts = append(parts, strconv.Quote(k)+": dyn("+v.cel+")")
		default:
			return "", notConvertible("puts a helper's result in a table")
		}
	}
	return "{" + strings.Join(parts, ", ") + "}", nil
}

func paren(s string) string {
	if isAtom(s) {
		return s
	}
	return "(" + s + ")"
}

var atom = regexp.MustCompile(`^(!?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[[^\]]*\])*|true|false|[0-9]+|"[^"]*"|has\([^()]*\)|\([^()]*\))$`)

func isAtom(s string) bool {
	return atom.MatchString(s)
}

// celIdent matches field names CEL can select with a dot; others (and
// CEL's reserved words) are indexed: object.metadata["namespace"].
var celIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var celReserved = map[string]bool{
	"as": true, "break": true, "const": true, "continue": true, "else": true, "false": true, "for": true,
	"function": true, "if": true, "import": true, "in": true, "let": true, "loop": true, "package": true,
	"namespace": true, "null": true, "return": true, "true": true, "var": true, "void": true, "while": true,
}

func selectable(k string) bool {
	return celIdent.MatchString(k) && !celReserved[k]
}

// celPath is object.a.b.
func celPath(path []string) string {
	var b strings.Builder
	b.WriteString("object")
	for _, k := range path {
		if selectable(k) {
			b.WriteString("." + k)
		} else {
			b.WriteString("[" + strconv.Quote(k) + "]")
		}
	}
	return b.String()
}

// celOptionalPath reads the first strict-1 fields as Lua does and the
// rest as optionals: object.a.?b.?c for strict 2. strict 0 means the
// default, all but the last.
func celOptionalPath(path []string, strict int) string {
	if strict <= 0 || strict > len(path) {
		return celOptPath(path)
	}
	var b strings.Builder
	b.WriteString(celPath(path[:strict-1]))
	for _, k := range path[strict-1:] {
		if selectable(k) {
			b.WriteString(".?" + k)
		} else {
			b.WriteString("[?" + strconv.Quote(k) + "]")
		}
	}
	return b.String()
}

// celOptPath is object.a.?b: fails where Lua fails (a missing), optional
// where Lua reads nil (b missing).
func celOptPath(path []string) string {
	last := path[len(path)-1]
	parent := celPath(path[:len(path)-1])
	if selectable(last) {
		return parent + ".?" + last
	}
	return parent + "[?" + strconv.Quote(last) + "]"
}

// celHas is has(object.a.b), or `"k" in object.a` for a key that cannot
// be selected.
func celHas(path []string) string {
	last := path[len(path)-1]
	parent := celPath(path[:len(path)-1])
	if selectable(last) {
		return "has(" + parent + "." + last + ")"
	}
	return "(" + strconv.Quote(last) + " in " + parent + ")"
}

// jsonPointer is path as an RFC 6901 pointer.
func jsonPointer(path []string) string {
	var b strings.Builder
	for _, k := range path {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))
	}
	return b.String()
}
