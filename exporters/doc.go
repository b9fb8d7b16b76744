// Package exporters renders judged results for people and for CI: the
// terminal summary of a run (WriteText), the verdict table (WriteVerdictTable)
// and JUnit XML (WriteJUnit), and verdict.json with junit.xml into a results
// directory (WriteVerdicts). The results files themselves (summary.json,
// requests.jsonl, latency.hlog, histograms.json, …) are package results';
// the Prometheus metrics are package exporters/prom's, and llm-d's
// benchmark report package exporters/llmd's. Exporters only read
// results; they never change them.
//
// A file writer's failure is a *results.WriteError naming the file, so a
// command can say which file a full disk cost it.
package exporters
