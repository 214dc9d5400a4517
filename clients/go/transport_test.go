package memsvc_test

// What the client puts on the wire, seen by a bare gRPC server standing in for
// a memsvc that never answers: the default deadline and the bearer token.

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	memsvc "memsvc.dev/clients/go"
	"memsvc.dev/clients/go/memsvcv1"
)

type seenCall struct {
	method      string
	deadline    time.Duration
	hasDeadline bool
	metadata    metadata.MD
}

// silentServer records each call and never answers it.
func silentServer(t *testing.T) (string, <-chan seenCall) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan seenCall, 8)
	release := make(chan struct{})
	server := grpc.NewServer(grpc.UnknownServiceHandler(func(_ interface{}, stream grpc.ServerStream) error {
		ctx := stream.Context()
		method, _ := grpc.MethodFromServerStream(stream)
		deadline, has := ctx.Deadline()
		md, _ := metadata.FromIncomingContext(ctx)
		calls <- seenCall{method, time.Until(deadline), has, md}
		<-release // never answer while the test runs: only the client may end the call
		return nil
	}))
	go server.Serve(listener)
	t.Cleanup(server.Stop)
	t.Cleanup(func() { close(release) }) // cleanups run last-in first-out: release, then stop
	return listener.Addr().String(), calls
}

func TestDefaultDeadlineAndToken(t *testing.T) {
	target, calls := silentServer(t)
	client, err := memsvc.Dial(target, memsvc.WithTimeout(150*time.Millisecond), memsvc.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	_, err = client.GetContext(context.Background(), &memsvcv1.GetContextRequest{SessionId: "s1"})
	failure, ok := memsvc.AsError(err)
	if !ok || failure.Code != codes.DeadlineExceeded {
		t.Fatalf("want DEADLINE_EXCEEDED, got %v", err)
	}
	call := <-calls
	if call.method != "/memsvc.v1.MemoryService/GetContext" || !call.hasDeadline || call.deadline > 150*time.Millisecond {
		t.Fatalf("call %+v", call)
	}
	if got := call.metadata.Get("authorization"); len(got) != 1 || got[0] != "Bearer s3cret" {
		t.Fatalf("authorization %v", got)
	}
}

func TestTenSecondDefault(t *testing.T) {
	target, calls := silentServer(t)
	client, err := memsvc.Dial(target)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		_, err := client.ListSessions(ctx, &memsvcv1.ListSessionsRequest{})
		result <- err
	}()
	call := <-calls
	cancel()
	if failure, ok := memsvc.AsError(<-result); !ok || failure.Code != codes.Canceled {
		t.Fatalf("want CANCELED, got %v", failure)
	}
	if !call.hasDeadline || call.deadline <= 9*time.Second || call.deadline > memsvc.DefaultTimeout {
		t.Fatalf("deadline %v", call.deadline)
	}
	if len(call.metadata.Get("authorization")) != 0 {
		t.Fatalf("a token was sent without WithToken")
	}
}

func TestDialRejectsMalformedTargets(t *testing.T) {
	for _, target := range []string{"", "localhost", "http://127.0.0.1:50051", "unix://", "127.0.0.1:port"} {
		if _, err := memsvc.Dial(target); err == nil {
			t.Errorf("Dial(%q) accepted", target)
		}
	}
	for _, target := range []string{"127.0.0.1:50051", "[::1]:50051", "unix:///run/memsvc.sock", "unix:memsvc.sock"} {
		client, err := memsvc.Dial(target)
		if err != nil {
			t.Errorf("Dial(%q): %v", target, err)
			continue
		}
		client.Close()
	}
}
