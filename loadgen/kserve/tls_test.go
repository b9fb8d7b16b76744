package kserve_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, as PEM files in dir.
func pki(t *testing.T, dir string) (caFile, srvCert, srvKey, cliCert, cliKey string, pool *x509.CertPool) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(k)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	srvCert, srvKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return write("ca.pem", "CERTIFICATE", caDER), srvCert, srvKey, cliCert, cliKey, pool
}

// Mutual TLS: the client verifies the server with the CA file and shows
// its certificate; without it the server refuses the handshake. Headers
// and the API key arrive as metadata.
func TestMutualTLSAndMetadata(t *testing.T) {
	dir := t.TempDir()
	caFile, srvCert, srvKey, cliCert, cliKey, pool := pki(t, dir)
	cert, err := tls.LoadX509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(fixed())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var seen metadata.MD
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			md, _ := metadata.FromIncomingContext(ss.Context())
			mu.Lock()
			seen = md
			mu.Unlock()
			return h(srv, ss)
		}))
	pb.RegisterGRPCInferenceServiceServer(gs, s.GRPCService())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	target := "grpcs://" + ln.Addr().String()
	mk := func(tc transport.Config) *kserve.Client {
		c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: target, Transport: tc}, Model: s.Config().Model, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := mk(transport.Config{CAFile: caFile, CertFile: cliCert, KeyFile: cliKey, APIKey: "sk-SECRET-1", Headers: []string{"X-Tenant: a", "X-Request-Id: theirs"}})
	if err := c.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := do(t, c, 1, prompts.Prompt{Text: "hi"}, 5*time.Second)
	if !rec.OK() || rec.OutputTokens != 4 {
		t.Fatalf("mTLS: %s %q", rec.ErrorKind, rec.Error)
	}
	mu.Lock()
	if got := seen.Get("authorization"); len(got) != 1 || got[0] != "Bearer sk-SECRET-1" || seen.Get("x-tenant")[0] != "a" ||
		// The request's id replaces a header of that name.
		!slices.Equal(seen.Get("x-request-id"), []string{"1"}) {
		t.Errorf("metadata %v", seen)
	}
	mu.Unlock()
	// No client certificate: the handshake fails, a connect error that
	// names no secret.
	rec = do(t, mk(transport.Config{CAFile: caFile, APIKey: "sk-SECRET-1"}), 2, prompts.Prompt{Text: "hi"}, 5*time.Second)
	if rec.ErrorKind != loadgen.ErrConnect || strings.Contains(rec.Error, "SECRET") {
		t.Errorf("without a client certificate: %s %q", rec.ErrorKind, rec.Error)
	}
	// An untrusted server: also a connect error.
	rec = do(t, mk(transport.Config{CertFile: cliCert, KeyFile: cliKey}), 3, prompts.Prompt{Text: "hi"}, 5*time.Second)
	if rec.ErrorKind != loadgen.ErrConnect || !strings.Contains(rec.Error, "certificate") {
		t.Errorf("unverified server: %s %q", rec.ErrorKind, rec.Error)
	}
	if _, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: target, Transport: transport.Config{CertFile: cliCert}}}); err == nil {
		t.Error("a certificate without its key accepted")
	}
}

// --connections N spreads the streams over N connections, round robin.
func TestConnectionsSpread(t *testing.T) {
	s, err := sim.New(fixed())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	peers := map[string]int{}
	gs := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if p, ok := peer.FromContext(ss.Context()); ok {
			mu.Lock()
			peers[p.Addr.String()]++
			mu.Unlock()
		}
		return h(srv, ss)
	}))
	pb.RegisterGRPCInferenceServiceServer(gs, s.GRPCService())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: ln.Addr().String()}, Model: s.Config().Model, MaxTokens: 2, Connections: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 9 {
		if rec := do(t, c, int64(i+1), prompts.Prompt{Text: "hi"}, 5*time.Second); !rec.OK() {
			t.Fatalf("%s %q", rec.ErrorKind, rec.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(peers) != 3 {
		t.Errorf("streams came over %d connections, want 3: %v", len(peers), peers)
	}
	for p, n := range peers {
		if n != 3 {
			t.Errorf("%s carried %d streams, want 3", p, n)
		}
	}
}

// The simulator multiplexes requests on one stream, as Triton does:
// responses carry their request's id, each request ends with its own final
// response, and a bad request is answered in error_message while the
// stream goes on.
func TestSimulatorMultiplexesOneStream(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	cc, err := grpc.NewClient(srv.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := pb.NewGRPCInferenceServiceClient(cc).ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := func(id, model string, tokens int) *pb.ModelInferRequest {
		sp := kserve.AppendBytesElement(nil, []byte(`{"max_tokens":`+strconv.Itoa(tokens)+`}`))
		return &pb.ModelInferRequest{ModelName: model, Id: id, Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}}, {Name: "stream", Datatype: "BOOL", Shape: []int64{1}},
			{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{1}}, {Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}}},
			RawInputContents: [][]byte{kserve.AppendBytesElement(nil, []byte("hi")), {1}, {1}, sp}}
	}
	for _, r := range []*pb.ModelInferRequest{req("a", srv.Config().Model, 3), req("b", srv.Config().Model, 5), req("c", "nope", 1)} {
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	st.CloseSend()
	got, finals, errs := map[string]int{}, map[string]bool{}, 0
	for {
		m, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		if m.GetErrorMessage() != "" {
			errs++
			if !strings.Contains(m.GetErrorMessage(), "unknown model") || m.GetInferResponse().GetId() != "c" {
				t.Errorf("error %q for %q", m.GetErrorMessage(), m.GetInferResponse().GetId())
			}
			continue
		}
		r := m.GetInferResponse()
		got[r.GetId()]++
		if r.GetParameters()[kserve.ParamFinal].GetBoolParam() {
			finals[r.GetId()] = true
		}
	}
	if got["a"] != 3 || got["b"] != 5 || !finals["a"] || !finals["b"] || errs != 1 {
		t.Errorf("responses %v, finals %v, %d errors", got, finals, errs)
	}
}
