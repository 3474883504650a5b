package wrap

import (
	"fmt"
	"strings"

	"github.com/yuin/gopher-lua/ast"

	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

// One converter per Karmada operation. Each takes the Lua script and
// returns the Flotilla rule, notes on what was left out on purpose, or an
// error wrapping errNotConvertible with the reason.

// luaEntry is each operation's Lua function.
var luaEntry = map[string]string{
	"healthInterpretation":     "InterpretHealth",
	"replicaResource":          "GetReplicas",
	"replicaRevision":          "ReviseReplica",
	"statusReflection":         "ReflectStatus",
	"statusAggregation":        "AggregateStatus",
	"dependencyInterpretation": "GetDependencies",
	"retention":                "Retain",
	"componentResource":        "GetComponents",
}

// evalFunction evaluates the operation's function with its first
// parameter as the object.
func evalFunction(script, fn string) ([]val, []string, error) {
	params, body, err := luaFunction(script, fn)
	if err != nil {
		return nil, nil, err
	}
	if len(params) < 1 {
		return nil, nil, notConvertible("function %s takes no object", fn)
	}
	ev := &luaEval{object: params[0]}
	env := luaEnv{params[0]: {kind: vObject}}
	for _, p := range params[1:] {
		env[p] = val{kind: vParam}
	}
	vals, err := ev.block(body, env)
	return vals, ev.notes, err
}

// convertHealthLua: InterpretHealth(observedObj) returning a boolean.
func convertHealthLua(script string) (string, []string, error) {
	vals, notes, err := evalFunction(script, "InterpretHealth")
	if err != nil {
		return "", nil, err
	}
	if len(vals) != 1 {
		return "", nil, notConvertible("does not return one value on every path")
	}
	switch v := vals[0]; v.kind {
	case vBool:
		return v.cel, notes, nil
	case vPath:
		// A boolean field: Karmada fails on anything else, Flotilla then
		// says Unknown.
		return celPath(v.path), notes, nil
	}
	return "", nil, notConvertible("does not return a boolean")
}

// convertReflectStatusLua: ReflectStatus(observedObj) returning a table
// of fields.
func convertReflectStatusLua(script string) (string, []string, error) {
	vals, notes, err := evalFunction(script, "ReflectStatus")
	if err != nil {
		return "", nil, err
	}
	if len(vals) != 1 {
		return "", nil, notConvertible("does not return one value on every path")
	}
	v := vals[0]
	switch v.kind {
	case vTable:
		s, err := renderTable(v.table)
		return s, notes, err
	case vExpr:
		if strings.Contains(v.cel, "{") {
			return v.cel, notes, nil
		}
	}
	return "", nil, notConvertible("does not return a table")
}

// convertReplicaResourceLua: GetReplicas(obj) returning the count and,
// optionally, kube.accuratePodRequirements(pod template), or no
// requirements: nothing, nil or an empty table.
func convertReplicaResourceLua(script string) (replicas, podTemplate string, notes []string, err error) {
	vals, notes, err := evalFunction(script, "GetReplicas")
	if err != nil {
		return "", "", nil, err
	}
	if len(vals) < 1 || len(vals) > 2 {
		return "", "", nil, notConvertible("does not return replicas and requirements on every path")
	}
	switch v := vals[0]; v.kind {
	case vPath:
		replicas = celPath(v.path)
	case vLit, vExpr:
		if !numeric(v) {
			return "", "", nil, notConvertible("returns replicas that are not a number")
		}
		replicas = v.cel
	default:
		return "", "", nil, notConvertible("returns replicas that are not a number")
	}
	if len(vals) == 2 {
		switch r := vals[1]; {
		case r.kind == vNil:
		case r.kind == vTable && len(r.table.keys) == 0:
			// Karmada's empty ReplicaRequirements: a replica needs no
			// room, as an empty podTemplate says.
		case r.kind == vPodTemplate && r.tmpl == nil:
			podTemplate = celPath(r.path)
		case r.kind == vPodTemplate:
			podTemplate, err = renderTable(r.tmpl)
			if err != nil {
				return "", "", nil, err
			}
		default:
			return "", "", nil, notConvertible("builds requirements other than kube.accuratePodRequirements(a pod template), {} or nil " +
				"(Flotilla reads a replica's requirements from a pod template)")
		}
	}
	return replicas, podTemplate, notes, nil
}

// convertReviseReplicaLua: ReviseReplica(obj, n) that sets one field to n
// and returns obj.
func convertReviseReplicaLua(script string) (string, error) {
	params, body, err := luaFunction(script, "ReviseReplica")
	if err != nil {
		return "", err
	}
	if len(params) != 2 {
		return "", notConvertible("ReviseReplica does not take (obj, replicas)")
	}
	if len(body) != 2 || !returnsIdent(body[1], params[0]) {
		return "", notConvertible("does more than set one field to the replicas")
	}
	as, ok := body[0].(*ast.AssignStmt)
	if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
		return "", notConvertible("does more than set one field to the replicas")
	}
	path, ok := fieldPath(as.Lhs[0], params[0])
	if rhs, isIdent := as.Rhs[0].(*ast.IdentExpr); !ok || !isIdent || rhs.Value != params[1] || len(path) == 0 {
		return "", notConvertible("does more than set one field to the replicas")
	}
	return jsonPointer(path), nil
}

// convertRetainLua: Retain(desiredObj, observedObj) made of
// `desiredObj.x = observedObj.x`, each optionally guarded by
// `if observedObj.x ~= nil` (Flotilla keeps the template's value where
// the member has none, which is what the guard says).
func convertRetainLua(script string) ([]string, []string, error) {
	params, body, err := luaFunction(script, "Retain")
	if err != nil {
		return nil, nil, err
	}
	if len(params) != 2 {
		return nil, nil, notConvertible("Retain does not take (desiredObj, observedObj)")
	}
	desired, observed := params[0], params[1]
	if len(body) == 0 || !returnsIdent(body[len(body)-1], desired) {
		return nil, nil, notConvertible("does not end with return %s", desired)
	}
	var paths, notes []string
	for _, st := range body[:len(body)-1] {
		guard := ast.Expr(nil)
		if is, ok := st.(*ast.IfStmt); ok && len(is.Else) == 0 && len(is.Then) == 1 {
			guard, st = is.Condition, is.Then[0]
		}
		as, ok := st.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
			return nil, nil, notConvertible("does more than copy observed fields into the desired object")
		}
		to, ok1 := fieldPath(as.Lhs[0], desired)
		from, ok2 := fieldPath(as.Rhs[0], observed)
		if !ok1 || !ok2 || len(to) == 0 || strings.Join(to, "\x00") != strings.Join(from, "\x00") {
			return nil, nil, notConvertible("does more than copy observed fields into the desired object")
		}
		if guard != nil && !guardsPath(guard, observed, to) {
			return nil, nil, notConvertible("copies a field under a condition other than its presence")
		}
		p := jsonPointer(to)
		if to[0] == "status" {
			notes = append(notes, fmt.Sprintf("%s is not retained: the agent never writes a member's status", p))
			continue
		}
		if guard == nil {
			notes = append(notes, fmt.Sprintf("%s: where the member's copy lacks the field, Karmada removes it and Flotilla keeps the template's value", p))
		}
		paths = append(paths, p)
	}
	return paths, notes, nil
}

// guardsPath says whether cond is a conjunction of `observed.q ~= nil`
// with every q a prefix of path.
func guardsPath(cond ast.Expr, observed string, path []string) bool {
	if l, ok := cond.(*ast.LogicalOpExpr); ok && l.Operator == "and" {
		return guardsPath(l.Lhs, observed, path) && guardsPath(l.Rhs, observed, path)
	}
	r, ok := cond.(*ast.RelationalOpExpr)
	if !ok || r.Operator != "~=" {
		return false
	}
	if _, isNil := r.Rhs.(*ast.NilExpr); !isNil {
		return false
	}
	q, ok := fieldPath(r.Lhs, observed)
	if !ok || len(q) == 0 || len(q) > len(path) {
		return false
	}
	for i := range q {
		if q[i] != path[i] {
			return false
		}
	}
	return true
}

// convertDependenciesLua: GetDependencies(desiredObj) that returns
// kube.getPodDependencies(desiredObj.<pod template>, desiredObj.metadata.namespace).
func convertDependenciesLua(script string) (string, []string, error) {
	vals, notes, err := evalFunction(script, "GetDependencies")
	if err != nil {
		return "", nil, err
	}
	if len(vals) != 1 || vals[0].kind != vPodDeps {
		return "", nil, notConvertible("does more than kube.getPodDependencies(pod template, namespace)")
	}
	return podDependenciesCEL(vals[0].path), notes, nil
}

func returnsIdent(st ast.Stmt, name string) bool {
	r, ok := st.(*ast.ReturnStmt)
	if !ok || len(r.Exprs) != 1 {
		return false
	}
	id, ok := r.Exprs[0].(*ast.IdentExpr)
	return ok && id.Value == name
}

// fieldPath is x as a field path under the variable root.
func fieldPath(x ast.Expr, root string) ([]string, bool) {
	var path []string
	for {
		switch e := x.(type) {
		case *ast.IdentExpr:
			return path, e.Value == root
		case *ast.AttrGetExpr:
			k, ok := e.Key.(*ast.StringExpr)
			if !ok {
				return nil, false
			}
			path = append([]string{k.Value}, path...)
			x = e.Object
		default:
			return nil, false
		}
	}
}

// podDependenciesCEL is Karmada's kube.getPodDependencies(template,
// namespace) as CEL: Flotilla's podTemplateDependencies function
// (customization.PodTemplateDependenciesFunction), which reads the pod
// template as the built-in interpreter reads a Deployment's. The
// namespace needs no argument: a pod references only objects of its own.
func podDependenciesCEL(template []string) string {
	return customization.PodTemplateDependenciesFunction + "(" + celPath(template) + ")"
}
