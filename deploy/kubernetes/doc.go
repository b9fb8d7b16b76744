// Package kubernetes holds tailgate's Kubernetes manifests (*.yaml beside
// this file) and the test that decodes each of them strictly into the
// Kubernetes API types, offline: a misspelt or misplaced field fails the
// test, as the API server would refuse it. It is its own module so the
// tool's build does not carry the Kubernetes API packages.
package kubernetes
