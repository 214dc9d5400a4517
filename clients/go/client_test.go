package memsvc_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	memsvc "memsvc.dev/clients/go"
	"memsvc.dev/clients/go/internal/testserver"
	"memsvc.dev/clients/go/memsvcv1"
)

// live starts one real server for the test and dials it over TCP and the unix socket.
func live(t *testing.T) (tcp, unix *memsvc.Client) {
	t.Helper()
	server, err := testserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	for _, target := range []struct {
		address string
		client  **memsvc.Client
	}{{server.TCP, &tcp}, {server.Unix, &unix}} {
		client, err := memsvc.Dial(target.address)
		if err != nil {
			t.Fatalf("dial %s: %v", target.address, err)
		}
		t.Cleanup(func() { client.Close() })
		*target.client = client
	}
	return tcp, unix
}

func contents(messages []*memsvcv1.Message) []string {
	out := make([]string, len(messages))
	for i, message := range messages {
		out[i] = message.GetContent()
	}
	return out
}

func equal(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

func TestAgainstLiveServer(t *testing.T) {
	tcp, unix := live(t)
	ctx := context.Background()

	t.Run("append over TCP, read the window back in order", func(t *testing.T) {
		appended, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-tcp", Messages: []*memsvcv1.Message{
			memsvc.User("We deploy on Fridays?"), memsvc.Assistant("No: never on Fridays.")}})
		if err != nil {
			t.Fatal(err)
		}
		stored := appended.GetMessages()
		if len(stored) != 2 || stored[0].GetId() >= stored[1].GetId() || stored[0].GetSendAtUnixNano() == 0 {
			t.Fatalf("stored messages lack increasing ids or send times: %v", stored)
		}
		if stored[1].GetRole() != memsvcv1.Role_ROLE_ASSISTANT {
			t.Fatalf("role: %v", stored[1].GetRole())
		}
		context, err := tcp.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: "go-tcp"})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"We deploy on Fridays?", "No: never on Fridays."}; !equal(contents(context.GetWindow()), want) {
			t.Fatalf("window %v, want %v", contents(context.GetWindow()), want)
		}
		if context.GetTurnContext() != nil {
			t.Fatalf("no summary yet, but a turn context: %v", context.GetTurnContext())
		}
	})

	t.Run("the unix socket reaches the same store", func(t *testing.T) {
		const sendAt = int64(1735732800000000000)
		_, err := unix.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-unix", Messages: []*memsvcv1.Message{{
			Role: memsvcv1.Role_ROLE_USER, Content: "hello from a socket", Sender: "ada", SendAtUnixNano: sendAt}}})
		if err != nil {
			t.Fatal(err)
		}
		context, err := tcp.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: "go-unix"})
		if err != nil {
			t.Fatal(err)
		}
		window := context.GetWindow()
		if len(window) != 1 || window[0].GetSender() != "ada" || window[0].GetSendAtUnixNano() != sendAt {
			t.Fatalf("window %v", window)
		}
	})

	t.Run("a retried Append with the same idempotency key stores nothing", func(t *testing.T) {
		request := &memsvcv1.AppendRequest{SessionId: "go-retry", IdempotencyKey: "pay-1",
			Messages: []*memsvcv1.Message{memsvc.User("charge the card once")}}
		first, err := tcp.Append(ctx, request)
		if err != nil {
			t.Fatal(err)
		}
		retried, err := unix.Append(ctx, request)
		if err != nil {
			t.Fatal(err)
		}
		if first.GetReplayed() || !retried.GetReplayed() ||
			retried.GetMessages()[0].GetId() != first.GetMessages()[0].GetId() {
			t.Fatalf("first %v, retried %v", first, retried)
		}
		context, err := tcp.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: "go-retry"})
		if err != nil || len(context.GetWindow()) != 1 {
			t.Fatalf("window after retry: %v, %v", context.GetWindow(), err)
		}
	})

	t.Run("bad input is INVALID_ARGUMENT with a stable reason and stores nothing", func(t *testing.T) {
		if _, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-bad",
			Messages: []*memsvcv1.Message{memsvc.User("kept")}}); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			reason string
			call   func() error
		}{
			{"INVALID_SESSION_ID", func() error {
				_, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "bad\x00id",
					Messages: []*memsvcv1.Message{memsvc.User("x")}})
				return err
			}},
			{"NO_MESSAGES", func() error {
				_, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-bad"})
				return err
			}},
			{"INVALID_ROLE", func() error {
				_, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-bad",
					Messages: []*memsvcv1.Message{{Content: "who said this?"}}})
				return err
			}},
			{"EMPTY_CONTENT", func() error {
				_, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-bad",
					Messages: []*memsvcv1.Message{memsvc.User("")}})
				return err
			}},
			{"INVALID_SESSION_ID", func() error {
				_, err := unix.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: ".."})
				return err
			}},
		}
		for _, c := range cases {
			failure, ok := memsvc.AsError(c.call())
			if !ok {
				t.Fatalf("%s: not a *memsvc.Error", c.reason)
			}
			if failure.Code != codes.InvalidArgument || failure.Reason != c.reason || failure.Message == "" {
				t.Errorf("want INVALID_ARGUMENT %s, got %v", c.reason, failure)
			}
			if status.Code(failure) != codes.InvalidArgument {
				t.Errorf("status.Code does not see through *Error: %v", status.Code(failure))
			}
		}
		context, err := tcp.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: "go-bad"})
		if err != nil || !equal(contents(context.GetWindow()), []string{"kept"}) {
			t.Fatalf("bad input changed the session: %v, %v", context.GetWindow(), err)
		}
	})

	t.Run("NOT_FOUND with its reason for a session that must exist", func(t *testing.T) {
		_, err := unix.GetSummary(ctx, &memsvcv1.GetSummaryRequest{SessionId: "go-never-written"})
		failure, ok := memsvc.AsError(err)
		if !ok || failure.Code != codes.NotFound || failure.Reason != "SESSION_NOT_FOUND" {
			t.Fatalf("want NOT_FOUND SESSION_NOT_FOUND, got %v", err)
		}
		if got := memsvc.CodeName(failure.Code); got != "NOT_FOUND" {
			t.Fatalf("CodeName %q", got)
		}
	})

	t.Run("sessions page in id order", func(t *testing.T) {
		for _, id := range []string{"go-page-b", "go-page-a", "go-page-c"} {
			if _, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: id,
				Messages: []*memsvcv1.Message{memsvc.User("in " + id)}}); err != nil {
				t.Fatal(err)
			}
		}
		var seen []string
		token := ""
		for {
			page, err := unix.ListSessions(ctx, &memsvcv1.ListSessionsRequest{PageSize: 2, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.GetSessions()) > 2 {
				t.Fatalf("page of %d", len(page.GetSessions()))
			}
			for _, info := range page.GetSessions() {
				seen = append(seen, info.GetSessionId())
			}
			if token = page.GetNextPageToken(); token == "" {
				break
			}
		}
		if !sort.StringsAreSorted(seen) {
			t.Fatalf("not in id order: %v", seen)
		}
		var pages []string
		for _, id := range seen {
			if strings.HasPrefix(id, "go-page-") {
				pages = append(pages, id)
			}
		}
		if !equal(pages, []string{"go-page-a", "go-page-b", "go-page-c"}) {
			t.Fatalf("sessions %v", seen)
		}
	})

	t.Run("a context deadline overrides the default", func(t *testing.T) {
		expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		_, err := tcp.GetContext(expired, &memsvcv1.GetContextRequest{SessionId: "go-tcp"})
		if failure, ok := memsvc.AsError(err); !ok || failure.Code != codes.DeadlineExceeded {
			t.Fatalf("want DEADLINE_EXCEEDED, got %v", err)
		}
	})
}
