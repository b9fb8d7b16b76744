// Package exporters writes a run's results: summary.json, requests.jsonl
// as records arrive, HdrHistogram interval logs, the terminal report, and
// JUnit XML. Exporters only read results; they never change them.
//
// Every file writer reports the file's path in its errors, and keeps what
// was already written when a later write fails (a full disk), so a failed
// run still leaves its evidence behind.
package exporters
