// Package kserve is the protocol client for the KServe v2 (Open Inference
// Protocol) gRPC API as Triton Inference Server serves it, with Triton's
// ModelStreamInfer for decoupled (streaming) models: --api kserve-grpc.
// GenerateClient (--api triton-generate) speaks Triton's generate extension
// over HTTP with the same tensor conventions, instants and error kinds; its
// stream ends with the body (no [DONE]) and an error inside it is
// data: {"error": …} under HTTP 200 (stream_error).
// It implements loadgen.Client: one Do call turns one prompt into one
// loadgen.Record, with the same instants and figures as package openai.
//
// # Requests
//
// With Config.Stream (the default) each request opens its own
// bidirectional ModelStreamInfer stream, sends one ModelInferRequest,
// half-closes, and reads responses until one carries the bool parameter
// triton_final_response = true; it asks for a flag-only final response
// (triton_enable_empty_final_response) so that a backend that ends that
// way does not leave the stream open. Without Stream it calls ModelInfer
// and reads one response.
//
// Streams spread over Config.Connections HTTP/2 connections, round robin:
// servers cap the concurrent streams of one connection (commonly 100).
//
// The tensors follow the backend's convention (Tensors): text_input (the
// prompt as one BYTES element), stream and exclude_input_in_output (BOOL),
// and max_tokens inside the sampling_parameters JSON (vLLM backend) or as
// an INT32 tensor (TensorRT-LLM ensemble). Preflight reads the model's
// metadata, so only tensors the model declares are sent, with its
// declared types and shapes (a batching model's [-1, 1] gets [1, 1]), and
// return_num_input_tokens / return_num_output_tokens are asked for where
// the model has them. A prompt's Params add inputs, sampling parameters
// and request parameters (see buildRequest). All inputs travel as
// raw_input_contents; a BYTES element is a 4-byte little-endian length
// and its bytes. Outputs are read from raw_output_contents or typed
// contents, whichever the server sends.
//
// # Timing model
//
// Every instant is rec.Now(), as in package openai:
//
//   - Sent is taken just before the stream is opened (or ModelInfer
//     called): connection setup, when needed, counts in TTFT.
//   - Chunk.At is taken when a response with non-empty text_output has
//     been received and decoded. Responses without text (a flag-only
//     final response, a response holding back a partial character) make
//     no chunk; tokens they count go to the next chunk, or the last.
//   - End is taken at the final response, at an error, or when the
//     context ends.
//
// A non-streamed answer is one chunk at End (Record.Unstreamed).
//
// Streamed responses are read as bytes and decoded in place by a protowire
// walker (wire.go) for the shapes servers send; anything unusual is left to
// proto.Unmarshal, and FuzzDecodeStream holds the two equal. Streamed
// requests are sent as bytes: a template per request shape with the id and
// text spliced in (encode.go), equal to proto.Marshal of the request.
//
// # Token counts
//
// num_output_tokens, when the model returns it, is each response's new
// tokens (the vLLM backend's definition): the chunk's Tokens are exact and
// their sum is OutputTokens (TokensFromUsage). num_input_tokens gives
// InputTokens. Without them Record.Finalize counts one token per chunk.
//
// # How a request can fail
//
// gRPC status codes map to the protocol-neutral kinds; the code is kept in
// Record.Status:
//
//	ResourceExhausted                              rate_limited (HTTP 429's counterpart)
//	InvalidArgument, NotFound, AlreadyExists,      client_error (HTTP 4xx)
//	  PermissionDenied, Unauthenticated,
//	  FailedPrecondition, OutOfRange, Unimplemented
//	Internal, Unknown, Aborted, DataLoss,          server_error (HTTP 5xx)
//	  Unavailable (sent by the server)
//	Unavailable from a connection that could not   connect before any response,
//	  be made or broke                               stream_truncated after one
//	DeadlineExceeded, or the context's deadline    timeout
//	Canceled by our context                        cancelled; by the server: server_error,
//	                                                 or stream_truncated after a response
//	error_message in a stream response             stream_error
//	the stream ends (OK) before the final response stream_truncated
//	a response that does not decode                protocol
//
// Error never contains the API key or the value of any credential-like
// header.
package kserve
