// Package gate is the analysis of a RolloutGroup, as one state machine kept in
// status.analysis: gates open after a batch of pods (AfterBatch) or once a
// member is complete (AfterMember), their checks are queried until each passes
// or one fails, a failure holds the group (onFailure Pause) or rolls it back
// (onFailure Rollback, or echelon.dev/abort), and the manual controls act once
// per annotation value. Everything here is client-free: the controller runs
// the queries and restores the templates between the steps.
//
// One reconcile carries a Pass through these steps: New, ApplyTo (the
// planner's holds), Begin on the plan made with the state as it was,
// DueChecks, QueryVars and Record around the controller's queries, Decide,
// SetRestore after the controller restored templates, ApplyTo again, then,
// around the planner's deletions, OpenBatchGateBefore, GateRecord and
// AfterAct. View, Status and RequeueAfter say what to write and when to look
// again.
package gate
