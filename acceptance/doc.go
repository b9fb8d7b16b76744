// Package acceptance runs an acceptance plan: the plan's stages in order,
// each a pipeline run into its own directory, every objective judged from
// exact streaming counts as records arrive, and an evidence pack (inputs,
// environment, verdicts, manifest) that a reviewer can sign and re-check.
//
// It also re-judges saved results (Check) and records manual stages
// (RecordManual), both reading the stages' requests.jsonl as one stream,
// so memory stays flat however long the run was. Each stage's pipeline
// writes its records once, into its own directory.
package acceptance
