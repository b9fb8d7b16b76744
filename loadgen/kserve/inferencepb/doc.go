// Package inferencepb is the generated Go for inference.proto: the KServe v2
// gRPC messages and the GRPCInferenceService client and server that
// loadgen/kserve and the simulator use. Do not edit the .pb.go files:
// change inference.proto and run `make proto`.
package inferencepb
