package redact

// Error is an error whose words were scrubbed and whose chain was kept:
// Error() returns the scrubbed text, Unwrap the errors it came from, so
// errors.Is(err, context.DeadlineExceeded) still holds for a timed-out
// request whose URL carried a key. Code that prints an error prints
// Error(); what Unwrap returns is for errors.Is and errors.As, never for
// display.
type Error struct {
	msg  string
	errs []error
}

// Wrap returns an Error saying scrubbed (text the caller already
// scrubbed) over the errors it came from; nil ones are left out.
func Wrap(scrubbed string, from ...error) error {
	e := &Error{msg: scrubbed}
	for _, err := range from {
		if err != nil {
			e.errs = append(e.errs, err)
		}
	}
	return e
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the errors the scrubbed words came from.
func (e *Error) Unwrap() []error { return e.errs }
