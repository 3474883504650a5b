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

package core

import (
	"errors"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

const reasonBlocked = "cluster(s) were blocked after an application failover (blockPredecessorSeconds)"

// blockedFilter is the hard filter of failover.application.blockPredecessorSeconds:
// a cluster the application failed over from is not placed again until the
// block ends (unlike eviction history without it, a preference that gives
// way when nothing else fits). A cluster still in the current result keeps
// it: the block is about going back, not about evicting what runs (that is
// application failover's own decision).
func blockedFilter(in Input, cluster string, current map[string]int32) bool {
	if _, scheduled := current[cluster]; scheduled {
		return false
	}
	for _, b := range workobjects.PredecessorBlocks(in.Spec, in.Now) {
		if b.Cluster == cluster {
			return true
		}
	}
	return false
}

// DescribeBlocks says which clusters are blocked at now and until when,
// for the Scheduled condition; "" when none is.
func DescribeBlocks(in Input) string {
	blocks := workobjects.PredecessorBlocks(in.Spec, in.Now)
	if len(blocks) == 0 {
		return ""
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Forever() {
			parts = append(parts, b.Cluster+" until its eviction history entry is removed (blockPredecessorSeconds 0)")
		} else {
			parts = append(parts, b.Cluster+" until "+b.Until.UTC().Format(time.RFC3339))
		}
	}
	return "blocked after an application failover: " + statuslimits.Join(parts, ", ", statuslimits.MaxSummary/2, "clusters")
}

// withBlocks adds the blocked clusters and their ends to a FitError's
// message: "1 cluster(s) were blocked" does not say until when.
func withBlocks(in Input, err error) error {
	var fit *FitError
	if !errors.As(err, &fit) {
		return err
	}
	if note := DescribeBlocks(in); note != "" {
		fit.Message = strings.TrimSuffix(fit.Message, ".") + "; " + note + "."
	}
	return err
}
