package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen/kserve"
)

// --connect-to sends the target's address elsewhere and leaves other
// addresses (a proxy, a metrics host) alone.
func TestConnectToDialer(t *testing.T) {
	var got []string
	stop := errors.New("recorded")
	tf := targetFlags{target: "http://sim.local/v1", connectTo: "127.0.0.2:8001",
		dial: func(_ context.Context, _, addr string) (net.Conn, error) { got = append(got, addr); return nil, stop }}
	d := tf.dialer()
	d(context.Background(), "tcp", "sim.local:80")
	d(context.Background(), "tcp", "metrics.local:9400")
	if len(got) != 2 || got[0] != "127.0.0.2:8001" || got[1] != "metrics.local:9400" {
		t.Errorf("dialled %v, want [127.0.0.2:8001 metrics.local:9400]", got)
	}
	tf.connectTo = ""
	got = nil
	tf.dialer()(context.Background(), "tcp", "sim.local:80")
	if len(got) != 1 || got[0] != "sim.local:80" {
		t.Errorf("without --connect-to dialled %v", got)
	}
	for _, c := range []struct{ api, to, want string }{
		{"openai-chat", "127.0.0.2", "want HOST:PORT"},
		{"openai-chat", "127.0.0.2:0", "want 1-65535"},
		{kserve.APIGRPC, "127.0.0.2:8001", "not for --api"},
		{"openai-chat", "127.0.0.2:8001", ""},
	} {
		err := (&targetFlags{api: c.api, connectTo: c.to}).checkConnectTo()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s %s: %v, want %q", c.api, c.to, err, c.want)
		}
	}
}
