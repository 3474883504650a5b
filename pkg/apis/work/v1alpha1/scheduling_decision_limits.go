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

package v1alpha1

// MaxClusterDecisions is the most entries SchedulingDecision.Clusters
// holds (its CRD MaxItems): selected clusters beyond it are counted in
// OmittedClusters like the unselected ones beyond
// MaxUnselectedClusterDecisions.
const MaxClusterDecisions = 128
