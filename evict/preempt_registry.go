package evict

import "slices"

var preemptionNames = []string{"fcfs", "priority", "progress", "cost"}

// PreemptionNames returns the names PreemptionByName accepts, the default ("fcfs") first.
// The slice is the caller's.
func PreemptionNames() []string { return slices.Clone(preemptionNames) }

// PreemptionByName returns the built-in preemption policy called name, or an
// *UnknownPolicyError (matching ErrUnknownPolicy) listing the valid names.
func PreemptionByName(name string) (Preemption, error) {
	switch name {
	case "fcfs":
		return NewFCFSPreemption(), nil
	case "priority":
		return NewPriorityPreemption(), nil
	case "progress":
		return NewProgressPreemption(), nil
	case "cost":
		return NewCostPreemption(), nil
	}
	return nil, &UnknownPolicyError{Kind: "preemption", Name: name, Valid: PreemptionNames()}
}
