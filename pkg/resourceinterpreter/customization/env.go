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
	"fmt"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// The cost budget. CEL cost units are the apiserver's: roughly one per
// operation, field access or list element visited.
const (
	// StaticCostBudget is the most an expression may cost by the static
	// estimate, under the size assumption below; more is refused when the
	// customization is written. The apiserver's per-expression limit
	// (k8s.io/apiserver/pkg/apis/cel.PerCallLimit).
	StaticCostBudget = 1_000_000

	// RuntimeCostLimit bounds one evaluation in cost units: an evaluation
	// that reaches it stops and counts as failed (health: Unknown). The
	// same as the static budget, so an expression that passed the
	// estimate only fails on an object larger than the assumption.
	RuntimeCostLimit = StaticCostBudget

	// EvalTimeout bounds one evaluation in time, checked every
	// InterruptCheckFrequency iterations of a comprehension (the only
	// place an expression of bounded length can spend long). cel-go's
	// cost tracking grows quadratically slower over long comprehensions
	// (its value stack is searched linearly), so the cost limit alone
	// would allow several hundred milliseconds; a typical rule takes
	// microseconds (BenchmarkHealthRule). An
	// evaluation stopped here fails as one stopped at the cost limit.
	EvalTimeout = 10 * time.Millisecond

	// InterruptCheckFrequency: comprehension iterations between two
	// checks of EvalTimeout.
	InterruptCheckFrequency = 64

	// AssumedMaxSize is the size assumption of the static estimate: every
	// list and map read from `object` or `statuses` is taken to have at
	// most this many entries, and every string this many bytes. With no
	// schema for the target kind (the variables are dyn) the estimate
	// would otherwise take every list as unbounded and refuse any
	// comprehension; with it, a loop over a list or two nested loops
	// (containers and their envFrom) fit and three nested loops are
	// refused. An object larger than the assumption is still bounded by
	// RuntimeCostLimit and EvalTimeout.
	AssumedMaxSize = 100
)

// Variable names.
const (
	// ObjectVar is the object being interpreted.
	ObjectVar = "object"
	// StatusesVar is statusAggregation's list of {clusterName, status}.
	StatusesVar = "statuses"
)

var (
	envOnce sync.Once
	envErr  error
	objEnv  *cel.Env // declares object
	aggEnv  *cel.Env // declares statuses
)

// environments returns Kubernetes' base CEL environment (the one the
// apiserver uses for validation rules and admission policies, with its
// list, string, regex, URL, quantity, IP, CIDR, format and semver
// libraries) at the default compatibility version, extended with the
// operation's variable as dyn and Flotilla's function
// podTemplateDependencies (PodTemplateDependenciesFunction).
func environments() (*cel.Env, *cel.Env, error) {
	envOnce.Do(func() {
		base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
		ext := func(name string) (*cel.Env, error) {
			set, err := base.Extend(environment.VersionedOptions{
				IntroducedVersion: version.MajorMinor(1, 0),
				EnvOptions:        []cel.EnvOption{cel.Variable(name, cel.DynType), podTemplateDependenciesLibrary()},
			})
			if err != nil {
				return nil, err
			}
			return set.NewExpressionsEnv(), nil
		}
		if objEnv, envErr = ext(ObjectVar); envErr != nil {
			envErr = fmt.Errorf("CEL environment: %w", envErr)
			return
		}
		if aggEnv, envErr = ext(StatusesVar); envErr != nil {
			envErr = fmt.Errorf("CEL environment: %w", envErr)
		}
	})
	return objEnv, aggEnv, envErr
}

// costEstimator is the apiserver's estimator of its library functions'
// costs, with the size assumption for values read from the variables, and
// of Flotilla's own functions (podTemplateDependencies). Static estimates
// and runtime tracking both use it.
var costEstimator = costModel{lib: &library.CostEstimator{SizeEstimator: sizeAssumption{}}}

type sizeAssumption struct{}

func (sizeAssumption) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	// Called only for values whose size the checker cannot compute:
	// values read from the variables and what is derived from them
	// (an optional's value, a conversion), all bounded by the object.
	return &checker.SizeEstimate{Min: 0, Max: AssumedMaxSize}
}

func (sizeAssumption) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}
