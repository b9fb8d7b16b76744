package main

import "github.com/tailgate-llm/tailgate/internal/field"

// flagNames are the flags that set the fields library errors name
// (*field.Error): the libraries say "model not given", the CLI "--model
// not given", the canary names its YAML key instead.
var flagNames = map[string]string{
	"API":         "--api",
	"APIKeyFile":  "--api-key-file",
	"Force":       "--force",
	"Headers":     "--header",
	"MetricsURL":  "--metrics-url",
	"Model":       "--model",
	"Record":      "--record",
	"Records":     "--records",
	"ServerModel": "--server-model",
	"SLO":         "--slo",
	"Shard":       "--shard",
}

// flagName is the flag for a field, "" for one no flag sets (its
// neutral words stay).
func flagName(f string) string { return flagNames[f] }

// errText is err as the CLI prints it: every setting a library error
// names is named as its flag.
func errText(err error) string { return field.Reword(err, flagName) }
