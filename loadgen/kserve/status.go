package kserve

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// CodeKind is the error kind of a gRPC status a server sent, as HTTP
// statuses map in package transport: the code itself stays in
// Record.Status. The table is in the package documentation and docs/protocols.md.
func CodeKind(c codes.Code) loadgen.ErrorKind {
	switch c {
	case codes.OK:
		return loadgen.ErrNone
	case codes.ResourceExhausted:
		return loadgen.ErrRateLimited // HTTP 429's counterpart
	case codes.DeadlineExceeded:
		return loadgen.ErrTimeout
	case codes.Canceled:
		return loadgen.ErrCancelled
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
		return loadgen.ErrClient // HTTP 4xx's
	}
	// Unknown, Aborted, Internal, Unavailable, DataLoss: HTTP 5xx's.
	return loadgen.ErrServer
}

// classify names a failed RPC. The context's own end comes first (the
// run's timeout or stop), as in transport.Classify. Then:
//   - an Unavailable status that grpc-go made itself, because no
//     connection could be made or the connection broke, is connect before
//     any response and stream_truncated after one;
//   - any status after content came is stream_truncated only for
//     transport failures; a status the server chose (Internal, …) keeps
//     its kind.
//
// where says at what point ("before the response", "after 3 responses").
func classify(ctx context.Context, err error, where string, started bool) (loadgen.ErrorKind, int, string) {
	switch cerr := ctx.Err(); {
	case errors.Is(cerr, context.DeadlineExceeded):
		return loadgen.ErrTimeout, int(codes.DeadlineExceeded), "request deadline exceeded " + where
	case cerr != nil:
		return loadgen.ErrCancelled, int(codes.Canceled), "cancelled (run stopped) " + where
	}
	st, ok := status.FromError(err)
	if !ok {
		return loadgen.ErrConnect, 0, where + ": " + err.Error()
	}
	code := st.Code()
	msg := fmt.Sprintf("gRPC %s %s", code, where)
	if m := strings.TrimSpace(st.Message()); m != "" {
		msg += ": " + transport.Truncate(m, transport.MaxErrorMessage)
	}
	kind := CodeKind(code)
	if code == codes.Unavailable && transportFailure(st.Message()) {
		kind = loadgen.ErrConnect
		if started {
			kind = loadgen.ErrStreamTruncated
		}
	}
	if code == codes.Canceled {
		// Not our context: the server or a proxy cancelled the stream.
		kind = loadgen.ErrServer
		if started {
			kind = loadgen.ErrStreamTruncated
		}
	}
	return kind, int(code), msg
}

// transportFailure reports whether an Unavailable status is grpc-go's
// account of a failed or broken connection rather than the server's
// answer: grpc-go words those "connection error", "error reading from
// server", "transport is closing" and so on.
func transportFailure(msg string) bool {
	for _, s := range []string{"connection error", "error reading from server", "transport is closing",
		"connection closed", "connection refused", "connection reset", "last connection error",
		"name resolver", "EOF", "GOAWAY", "broken pipe", "dial"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
