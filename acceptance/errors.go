package acceptance

// InvalidError is an acceptance run that could not be done as planned: the
// target is unreachable, the model is missing. Commands map it to exit 3
// (run invalid), like a results directory that cannot be written
// (*results.WriteError); any other error is a usage or configuration error.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }

func (e *InvalidError) Unwrap() error { return e.Err }
