/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package customization

import (
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	apiservercel "k8s.io/apiserver/pkg/cel"

	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// boundedQuantityCalls is a CEL program decorator that makes the quantity
// library's two string parsers, quantity(string) and isQuantity(string),
// parse with quantities.Parse instead of resource.ParseQuantity. Their
// argument is usually a tenant's field, and ParseQuantity spends seconds
// on a 10-byte "1e-10000000" — within one call, which the cost limit
// counts only after it returns — or returns a value whose every
// comparison computes 10^N ("1e10000000"). quantity() of a string Parse
// refuses is an evaluation error saying why; isQuantity() of it is false.
// The call keeps its function name and overload, so the runtime cost is
// counted as before (library.CostEstimator).
func boundedQuantityCalls(i interpreter.Interpretable) (interpreter.Interpretable, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || len(call.Args()) != 1 {
		return i, nil
	}
	var impl func(ref.Val) ref.Val
	switch call.Function() {
	case "quantity":
		impl = boundedQuantity
	case "isQuantity":
		impl = boundedIsQuantity
	default:
		return i, nil
	}
	return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(),
		func(args ...ref.Val) ref.Val { return impl(args[0]) }), nil
}

func boundedQuantity(arg ref.Val) ref.Val {
	s, ok := arg.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	q, err := quantities.Parse(s)
	if err != nil {
		return types.WrapErr(err)
	}
	return apiservercel.Quantity{Quantity: &q}
}

func boundedIsQuantity(arg ref.Val) ref.Val {
	s, ok := arg.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	_, err := quantities.Parse(s)
	return types.Bool(err == nil)
}
