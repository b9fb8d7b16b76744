package kserve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/loadgen"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// Side requests are bounded so that a target that does not answer fails a
// preflight within seconds.
const (
	PreflightTimeout = 10 * time.Second
	describeTimeout  = 5 * time.Second
)

// Preflight checks, within PreflightTimeout and in this order, that the
// server is live (ServerLive) and ready (ServerReady), that the model is
// ready (ModelReady), and reads the model's tensors (ModelMetadata): the
// input and output tensors the convention needs must be there, and the
// convention (TensorsAuto) and shapes are taken from them. Each failure
// names the target and the missing model or tensor.
func (c *Client) Preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	ctx = c.outgoing(ctx, "")
	if c.model == "" {
		return fmt.Errorf("target %s: %w", c.safeTarget, field.Errorf("Model", "not given (KServe has no model list)"))
	}
	cl := c.clients[0]
	live, err := cl.ServerLive(ctx, &pb.ServerLiveRequest{})
	if err != nil {
		return c.sideError("ServerLive", err)
	}
	if !live.GetLive() {
		return fmt.Errorf("target %s: the server says it is not live (ServerLive)", c.safeTarget)
	}
	ready, err := cl.ServerReady(ctx, &pb.ServerReadyRequest{})
	if err != nil {
		return c.sideError("ServerReady", err)
	}
	if !ready.GetReady() {
		return fmt.Errorf("target %s: the server says it is not ready (ServerReady)", c.safeTarget)
	}
	mr, err := cl.ModelReady(ctx, &pb.ModelReadyRequest{Name: c.model, Version: c.version})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return fmt.Errorf("target %s does not serve model %q: %v", c.safeTarget, c.modelName(), c.scrub(status.Convert(err).Message()))
		}
		return c.sideError("ModelReady", err)
	}
	if !mr.GetReady() {
		return fmt.Errorf("target %s: model %q is not ready (ModelReady): not loaded, still loading, or not served", c.safeTarget, c.modelName())
	}
	md, err := cl.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: c.model, Version: c.version})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return fmt.Errorf("target %s does not serve model %q: %v", c.safeTarget, c.modelName(), c.scrub(status.Convert(err).Message()))
		}
		return c.sideError("ModelMetadata", err)
	}
	spec, err := specFromMetadata(md, c.tensors)
	if err != nil {
		return fmt.Errorf("target %s: %v", c.safeTarget, c.scrub(err.Error()))
	}
	c.spec.Store(spec)
	return nil
}

// Prepare is Preflight: the run cannot send the model's tensors before it
// has read them (protocol.Preparer).
func (c *Client) Prepare(ctx context.Context) error { return c.Preflight(ctx) }

func (c *Client) modelName() string {
	if c.version != "" {
		return c.model + "@" + c.version
	}
	return c.model
}

// sideError words a failed side RPC.
func (c *Client) sideError(rpc string, err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("target %s refuses the credentials (check the API key and headers): %s: %s", c.safeTarget, rpc, c.scrub(st.Message()))
	case codes.Unimplemented:
		return fmt.Errorf("target %s does not implement %s: is it a KServe v2 gRPC endpoint?", c.safeTarget, rpc)
	}
	return &transport.Unanswered{Target: c.safeTarget, Request: rpc, Err: redact.Wrap("gRPC "+st.Code().String()+": "+c.scrub(st.Message()), err)}
}

// DescribeServer reports the server's name and version (ServerMetadata)
// and the model, for environment.json. Failure is in ServerInfo.Error.
func (c *Client) DescribeServer(ctx context.Context) loadgen.ServerInfo {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	info := loadgen.ServerInfo{URL: c.safeTarget}
	if c.model != "" {
		info.Models = []string{c.model}
	}
	sm, err := c.clients[0].ServerMetadata(c.outgoing(ctx, ""), &pb.ServerMetadataRequest{})
	if err != nil {
		info.Error = c.sideError("ServerMetadata", err).Error()
		return info
	}
	info.Headers = map[string]string{}
	if n := sm.GetName(); n != "" {
		info.Headers["server"] = c.scrub(n)
	}
	if v := sm.GetVersion(); v != "" {
		info.Headers["server-version"] = c.scrub(v)
	}
	return info
}

// DiscoverModel fails: the KServe RPCs the client uses list no models.
// It asks ServerLive first, so that a target that does not answer is
// reported as such (refused, unreachable, credentials refused) rather
// than as a missing --model.
func (c *Client) DiscoverModel(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	if _, err := c.clients[0].ServerLive(c.outgoing(ctx, ""), &pb.ServerLiveRequest{}); err != nil {
		return "", &transport.Undiscovered{Target: c.safeTarget, Err: c.sideError("ServerLive", err)}
	}
	// A property of the protocol, not a finding about the server: no
	// Undiscovered, which names the target.
	return "", errors.New("the KServe v2 protocol lists no models")
}

// SetModel sets the model requests name. Call it before the first Do.
func (c *Client) SetModel(m string) { c.model = m }
