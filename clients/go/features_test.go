package memsvc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	memsvc "memsvc.dev/clients/go"
	"memsvc.dev/clients/go/internal/testserver"
	"memsvc.dev/clients/go/memsvcv1"
)

var quick = memsvc.RetryPolicy{Attempts: 4, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	Multiplier: 2}

func TestEnumNames(t *testing.T) {
	match, err := memsvc.Named[memsvcv1.Match]("keyword")
	if err != nil || match != memsvcv1.Match_MATCH_KEYWORD {
		t.Fatalf("keyword: %v %v", match, err)
	}
	if mode, _ := memsvc.Named[memsvcv1.ResetMode]("ALL"); mode != memsvcv1.ResetMode_RESET_MODE_ALL {
		t.Fatalf("ALL: %v", mode)
	}
	if week, _ := memsvc.Named[memsvcv1.TimeRange]("TIME_RANGE_WEEK"); week != memsvcv1.TimeRange_TIME_RANGE_WEEK {
		t.Fatalf("TIME_RANGE_WEEK: %v", week)
	}
	if _, err := memsvc.Named[memsvcv1.Match]("kw"); err == nil ||
		!strings.Contains(err.Error(), "Match must be one of semantic, keyword, hybrid") {
		t.Fatalf("kw: %v", err)
	}
	if label := memsvc.Label(memsvcv1.Outcome_OUTCOME_ABANDONED); label != "abandoned" {
		t.Fatalf("label %q", label)
	}
	if label := memsvc.Label(memsvcv1.Source_SOURCE_UNSPECIFIED); label != "" {
		t.Fatalf("unspecified label %q", label)
	}
}

func TestErrorsMatchTheirCodeSentinel(t *testing.T) {
	tcp, _ := live(t)
	ctx := context.Background()
	_, err := tcp.GetSummary(ctx, &memsvcv1.GetSummaryRequest{SessionId: "never"})
	if !errors.Is(err, memsvc.ErrNotFound) || errors.Is(err, memsvc.ErrInvalidArgument) {
		t.Fatalf("GetSummary of a session that never existed: %v", err)
	}
	if failure, _ := memsvc.AsError(err); failure.Reason != "SESSION_NOT_FOUND" {
		t.Fatalf("reason %q", failure.Reason)
	}
	message, err := memsvc.Msg("robot", "x")
	if message != nil || err == nil {
		t.Fatalf("a role that does not exist: %v %v", message, err)
	}
	message, _ = memsvc.Msg("assistant", "hi")
	if _, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "bad\u202eid", Messages: []*memsvcv1.Message{message}}); !errors.Is(err, memsvc.ErrInvalidArgument) {
		t.Fatalf("bad id: %v", err)
	}
}

// throughProxy starts a real server and the recording proxy in front of it, answering as the
// fail rules say, and dials the proxy with quick retries.
func throughProxy(t *testing.T, fail ...string) (*memsvc.Client, *testserver.Proxy) {
	t.Helper()
	server, err := testserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	proxy, err := testserver.StartProxy(server.TCP, fail...)
	if err != nil {
		t.Fatal(err)
	}
	client, err := memsvc.Dial(proxy.Target, memsvc.WithRetry(quick))
	if err != nil {
		t.Fatal(err)
	}
	return client, proxy
}

func TestRetriesFollowTheContract(t *testing.T) {
	client, proxy := throughProxy(t, "GetContext=UNAVAILABLE:2", "Append=UNAVAILABLE:2", "Summarize=UNAVAILABLE:1",
		"ListSessions=UNAVAILABLE:1", "DeleteMessages=UNAVAILABLE:2", "ReplaceMessages=UNAVAILABLE:2")
	ctx := context.Background()
	if _, err := client.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: "r1"}); err != nil {
		t.Fatalf("GetContext after two UNAVAILABLE: %v", err)
	}
	noKey := &memsvcv1.AppendRequest{SessionId: "r1", Messages: []*memsvcv1.Message{memsvc.User("no key")}}
	if _, err := client.Append(ctx, noKey); !errors.Is(err, memsvc.ErrUnavailable) {
		t.Fatalf("an Append without a key is not retried: %v", err)
	}
	keyed := &memsvcv1.AppendRequest{SessionId: "r1", IdempotencyKey: "k1",
		Messages: []*memsvcv1.Message{memsvc.User("keyed")}}
	if _, err := client.Append(ctx, keyed); err != nil {
		t.Fatalf("an Append with a key is retried: %v", err)
	}
	unkeyedReplace := &memsvcv1.ReplaceMessagesRequest{SessionId: "r1", Messages: []*memsvcv1.Message{memsvc.User("no key")}}
	if _, err := client.ReplaceMessages(ctx, unkeyedReplace); !errors.Is(err, memsvc.ErrUnavailable) {
		t.Fatalf("a ReplaceMessages without a key is not retried: %v", err)
	}
	keyedReplace := &memsvcv1.ReplaceMessagesRequest{SessionId: "r1", IdempotencyKey: "k2",
		Messages: []*memsvcv1.Message{memsvc.User("replaced")}}
	if _, err := client.ReplaceMessages(ctx, keyedReplace); err != nil {
		t.Fatalf("a ReplaceMessages with a key is retried: %v", err)
	}
	if _, err := client.Summarize(ctx, &memsvcv1.SummarizeRequest{SessionId: "r1"}); !errors.Is(err, memsvc.ErrUnavailable) {
		t.Fatalf("Summarize is not retried: %v", err)
	}
	if _, err := client.DeleteMessages(ctx, &memsvcv1.DeleteMessagesRequest{SessionId: "r1", Last: 1}); !errors.Is(err, memsvc.ErrUnavailable) {
		t.Fatalf("DeleteMessages by last is not retried: %v", err)
	}
	if _, err := client.DeleteMessages(ctx, &memsvcv1.DeleteMessagesRequest{SessionId: "r1", Ids: []uint64{1}}); err != nil {
		t.Fatalf("DeleteMessages by ids is retried: %v", err)
	}
	off := memsvc.WithRetryCall(ctx, false)
	if _, err := client.ListSessions(off, &memsvcv1.ListSessionsRequest{}); !errors.Is(err, memsvc.ErrUnavailable) {
		t.Fatalf("WithRetryCall(false): %v", err)
	}
	client.Close()
	calls, err := proxy.Stop()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, call := range calls {
		name := call.Method[strings.LastIndex(call.Method, "/")+1:]
		count[name]++
		if session := call.Metadata[memsvc.SessionMetadata]; (name == "ListSessions") != (session == "") {
			t.Fatalf("%s carried %s=%q", name, memsvc.SessionMetadata, session)
		}
	}
	want := map[string]int{"GetContext": 3, "Append": 3, "Summarize": 1, "ListSessions": 1, "DeleteMessages": 3}
	for name, n := range want {
		if count[name] != n {
			t.Fatalf("%s reached the proxy %d times, want %d (all: %v)", name, count[name], n, count)
		}
	}
}

func TestKeywordOptionsReachTheServer(t *testing.T) {
	client, _ := live(t)
	ctx := context.Background()
	if _, err := client.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-words", Messages: []*memsvcv1.Message{
		memsvc.User("a blue car passed a grey heron"), memsvc.Assistant("blue skies today"),
		memsvc.User("lunch was pasta")}}); err != nil {
		t.Fatal(err)
	}
	search := func(request *memsvcv1.SearchRequest) []*memsvcv1.SearchHit {
		t.Helper()
		request.SessionId, request.Match = "go-words", memsvcv1.Match_MATCH_KEYWORD
		found, err := client.Search(ctx, request)
		if err != nil {
			t.Fatal(err)
		}
		return found.GetHits()
	}
	if hits := search(&memsvcv1.SearchRequest{Query: "heron blue"}); len(hits) != 2 {
		t.Fatalf("any word: %v", hits)
	}
	strict := search(&memsvcv1.SearchRequest{Query: "heron blue", RequireAllWords: true})
	if len(strict) != 1 || strict[0].GetMessage().GetContent() != "a blue car passed a grey heron" {
		t.Fatalf("RequireAllWords: %v", strict)
	}
	around := search(&memsvcv1.SearchRequest{Query: "pasta", WithContext: true})
	if len(around) != 3 || !around[0].GetIsContext() || around[2].GetIsContext() || around[2].GetRun() != 1 {
		t.Fatalf("WithContext: %v", around)
	}
}

func TestRolesPayloadsPagesAndDeletion(t *testing.T) {
	tcp, _ := live(t)
	ctx := context.Background()
	payload := `{"tool_calls": [{"id": "call_1", "args": {"city": "Z\u00fcrich"}}]}`
	system, _ := memsvc.Msg("system", "Be brief.")
	tool, _ := memsvc.Msg("tool", "sunny")
	tool.PayloadJson = `"sunny"`
	call := memsvc.Assistant("get_weather(Zurich)")
	call.PayloadJson = payload
	if _, err := tcp.Append(ctx, &memsvcv1.AppendRequest{SessionId: "framework",
		Messages: []*memsvcv1.Message{system, memsvc.User("Weather in Zurich?"), call, tool}}); err != nil {
		t.Fatal(err)
	}
	first, err := tcp.ListMessages(ctx, &memsvcv1.ListMessagesRequest{SessionId: "framework", PageSize: 3})
	if err != nil || len(first.Messages) != 3 || first.Messages[0].Role != memsvcv1.Role_ROLE_SYSTEM ||
		first.Messages[2].PayloadJson != payload || first.NextPageToken == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	rest, err := tcp.ListMessages(ctx, &memsvcv1.ListMessagesRequest{SessionId: "framework",
		PageToken: first.NextPageToken})
	if err != nil || len(rest.Messages) != 1 || rest.Messages[0].Role != memsvcv1.Role_ROLE_TOOL ||
		rest.Messages[0].PayloadJson != `"sunny"` || rest.NextPageToken != "" {
		t.Fatalf("last page: %v %v", rest, err)
	}
	popped, err := tcp.DeleteMessages(ctx, &memsvcv1.DeleteMessagesRequest{SessionId: "framework", Last: 1})
	if err != nil || len(popped.Messages) != 1 || popped.Messages[0].Content != "sunny" ||
		popped.Deleted.GetHistoryMessages() != 1 {
		t.Fatalf("pop: %v %v", popped, err)
	}
	_, err = tcp.DeleteMessages(ctx, &memsvcv1.DeleteMessagesRequest{SessionId: "framework", Ids: []uint64{1}, Last: 1})
	if failure, _ := memsvc.AsError(err); !errors.Is(err, memsvc.ErrInvalidArgument) ||
		failure.Reason != "DELETE_TARGET_AMBIGUOUS" {
		t.Fatalf("ids and last: %v", err)
	}
}

func TestRepliesStayWithinTheServersReplyBudget(t *testing.T) {
	server, err := testserver.Start("--max-reply-bytes", "1200000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	client, err := memsvc.Dial(server.TCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	for n := 1; n <= 3; n++ {
		result, _ := memsvc.Msg("tool", "result")
		result.PayloadJson = `{"output": "` + strings.Repeat("r", 500_000) + `"}`
		if _, err := client.Append(ctx, &memsvcv1.AppendRequest{SessionId: "go-big",
			Messages: []*memsvcv1.Message{result}}); err != nil {
			t.Fatal(err)
		}
	}
	window, err := client.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: "go-big"})
	if err != nil || len(window.Window) != 2 || window.Window[0].Id != 2 || window.OmittedMessages != 1 {
		t.Fatalf("window: %d messages, %d omitted, %v", len(window.GetWindow()), window.GetOmittedMessages(), err)
	}
	older, err := client.ListMessages(ctx, &memsvcv1.ListMessagesRequest{SessionId: "go-big", NewestFirst: true,
		PageToken: window.OlderPageToken})
	if err != nil || len(older.Messages) != 1 || older.Messages[0].Id != 1 {
		t.Fatalf("older: %v %v", older, err)
	}
	light, err := client.GetContext(ctx, &memsvcv1.GetContextRequest{SessionId: "go-big", OmitPayloads: true})
	if err != nil || len(light.Window) != 3 || light.OmittedMessages != 0 || light.Window[0].PayloadJson != "" {
		t.Fatalf("without payloads: %v", err)
	}
	echo, err := client.DeleteMessages(ctx, &memsvcv1.DeleteMessagesRequest{SessionId: "go-big", Last: 3})
	if err != nil || len(echo.Messages) != 3 || echo.ContentsOmitted != 1 || echo.Messages[0].Content != "" {
		t.Fatalf("echo: %d omitted, %v", echo.GetContentsOmitted(), err)
	}
}
