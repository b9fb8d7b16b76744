// Package e2e holds end-to-end tests: the load engine and the OpenAI client
// against the built-in simulator, whose server-side timestamps are the
// truth every measured figure is checked against.
package e2e
