package memsvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	memsvc "memsvc.dev/clients/go"
	"memsvc.dev/clients/go/memsvcv1"
)

var (
	system  = json.RawMessage(`{"role": "system", "content": "You are a careful agent. Use the tools."}`)
	bigText = strings.Repeat("alpha beta gamma delta ", 500) // about 2,000 tokens
)

func chat(t *testing.T, message map[string]interface{}) json.RawMessage {
	t.Helper()
	encoded, err := json.Marshal(message)
	if err != nil {
		t.Fatal(err)
	}
	return encoded
}

func toolCall(t *testing.T, id, name string, args map[string]interface{}) json.RawMessage {
	encoded, _ := json.Marshal(args)
	return chat(t, map[string]interface{}{"role": "assistant", "content": nil, "tool_calls": []interface{}{
		map[string]interface{}{"id": id, "type": "function",
			"function": map[string]interface{}{"name": name, "arguments": string(encoded)}}}})
}

func toolResult(t *testing.T, id, content string) json.RawMessage {
	return chat(t, map[string]interface{}{"role": "tool", "tool_call_id": id, "content": content})
}

func user(t *testing.T, content string) json.RawMessage {
	return chat(t, map[string]interface{}{"role": "user", "content": content})
}

// stages is each stage and its outcome by plain name: "check_threshold:unchanged".
func stages(reply *memsvcv1.FitContextResponse) []string {
	out := []string{}
	for _, stage := range reply.GetStages() {
		out = append(out, memsvc.Label(stage.GetStage())+":"+memsvc.Label(stage.GetOutcome()))
	}
	return out
}

func fit(ctx context.Context, client *memsvc.Client, request *memsvcv1.FitContextRequest,
	messages ...json.RawMessage) (*memsvcv1.FitContextResponse, error) {
	request.SessionId, request.Messages = "s", memsvc.ChatMessages(messages)
	if request.Model == "" {
		request.Vendor, request.Model = "openai", "gpt-4o"
	}
	return client.FitContext(ctx, request)
}

func sameJSON(t *testing.T, got, want []json.RawMessage) {
	t.Helper()
	decode := func(messages []json.RawMessage) []interface{} {
		out := []interface{}{}
		for _, message := range messages {
			var value interface{}
			if err := json.Unmarshal(message, &value); err != nil {
				t.Fatalf("%s: %v", message, err)
			}
			out = append(out, value)
		}
		return out
	}
	if g, w := decode(got), decode(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("messages\n got %v\nwant %v", g, w)
	}
}

func TestFitContextAgainstLiveServer(t *testing.T) {
	_, client := live(t)
	ctx := context.Background()

	t.Run("under budget the run comes back byte for byte", func(t *testing.T) {
		sent := []json.RawMessage{system, json.RawMessage(`{"role":"user",  "content":"list /srv", "x-client": {"trace": [1, 2]}}`),
			toolCall(t, "c1", "ls", map[string]interface{}{"path": "/srv"}), toolResult(t, "c1", "a b c")}
		reply, err := fit(ctx, client, &memsvcv1.FitContextRequest{}, sent...)
		if err != nil {
			t.Fatal(err)
		}
		if got := memsvc.FittedMessages(reply); !reflect.DeepEqual(got, sent) {
			t.Fatalf("messages changed: %s", got)
		}
		if got := stages(reply); !reflect.DeepEqual(got, []string{"check_threshold:unchanged"}) {
			t.Fatalf("stages %v", got)
		}
		if reply.GetContextWindow() != 128000 || memsvc.Label(reply.GetWindowSource()) != "shipped" ||
			reply.GetWindowEntry() != "openai/gpt-4o" || reply.GetBudgetTokens() != 102400 {
			t.Fatalf("window %v %v %q %v", reply.GetContextWindow(), reply.GetWindowSource(), reply.GetWindowEntry(),
				reply.GetBudgetTokens())
		}
		if reply.GetCounting() != memsvcv1.TokenCounting_TOKEN_COUNTING_EXACT || reply.GetTokenizer() != "o200k_base" ||
			!reply.GetFits() || reply.GetChanged() || reply.GetTokensBefore() != reply.GetTokensAfter() {
			t.Fatalf("count %v", reply)
		}
	})

	t.Run("an unknown model gets 128K and an estimate", func(t *testing.T) {
		reply, err := fit(ctx, client, &memsvcv1.FitContextRequest{Vendor: "acme", Model: "rocket-9"}, system,
			user(t, "我們週五部署嗎？"))
		if err != nil {
			t.Fatal(err)
		}
		if reply.GetContextWindow() != 128000 || reply.GetWindowSource() != memsvcv1.WindowSource_WINDOW_SOURCE_FALLBACK ||
			memsvc.Label(reply.GetCounting()) != "estimate" {
			t.Fatalf("reply %v", reply)
		}
		mine, err := fit(ctx, client, &memsvcv1.FitContextRequest{Vendor: "acme", Model: "rocket-9", ContextWindow: 8000,
			ReservedTokens: 400}, system)
		if err != nil || memsvc.Label(mine.GetWindowSource()) != "request" || mine.GetBudgetTokens() != 6000 {
			t.Fatalf("a window from the call: %v %v", mine, err)
		}
	})

	t.Run("without an LLM the LLM stages are skipped and say so", func(t *testing.T) {
		sent := []json.RawMessage{system, user(t, "go"), toolCall(t, "c1", "dump", nil), toolResult(t, "c1", bigText)}
		reply, err := fit(ctx, client, &memsvcv1.FitContextRequest{ContextWindow: 1000}, sent...)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"check_threshold:unchanged", "extract_old_histories:skipped", "tool_history:skipped"}
		if got := stages(reply); !reflect.DeepEqual(got, want) {
			t.Fatalf("stages %v", got)
		}
		for _, stage := range reply.GetStages()[1:] {
			if stage.GetReason() != "LLM_NOT_CONFIGURED" {
				t.Fatalf("reason %q", stage.GetReason())
			}
		}
		if reply.GetFits() || reply.GetChanged() || !reflect.DeepEqual(memsvc.FittedMessages(reply), sent) ||
			reply.GetUnfitReason() != "LLM_NOT_CONFIGURED" {
			t.Fatalf("reply %v", reply)
		}
	})

	t.Run("overflow drops the oldest exchange, then nothing fits", func(t *testing.T) {
		question := user(t, "summarize the logs")
		second := []json.RawMessage{toolCall(t, "c2", "tail", nil), toolResult(t, "c2", "ok")}
		sent := append([]json.RawMessage{system, question, toolCall(t, "c1", "read_log", nil), toolResult(t, "c1", bigText)},
			second...)
		trimmed, err := fit(ctx, client, &memsvcv1.FitContextRequest{Overflow: true}, sent...)
		if err != nil {
			t.Fatal(err)
		}
		if got := stages(trimmed); got[len(got)-1] != "trim_fallback:compacted" {
			t.Fatalf("stages %v", got)
		}
		sameJSON(t, memsvc.FittedMessages(trimmed), append([]json.RawMessage{system, question}, second...))
		again, err := fit(ctx, client, &memsvcv1.FitContextRequest{Overflow: true}, memsvc.FittedMessages(trimmed)...)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, memsvc.FittedMessages(again), []json.RawMessage{system, question})
		_, err = fit(ctx, client, &memsvcv1.FitContextRequest{Overflow: true}, memsvc.FittedMessages(again)...)
		failure, _ := memsvc.AsError(err)
		if !errors.Is(err, memsvc.ErrFailedPrecondition) || failure.Reason != "CONTEXT_TOO_LARGE" ||
			!strings.Contains(failure.Message, "nothing is left to compact") {
			t.Fatalf("nothing left to drop: %v", err)
		}
		_, err = fit(ctx, client, &memsvcv1.FitContextRequest{}, json.RawMessage("{not json"))
		if failure, _ := memsvc.AsError(err); !errors.Is(err, memsvc.ErrInvalidArgument) ||
			failure.Reason != "INVALID_CHAT_MESSAGE" {
			t.Fatalf("not JSON: %v", err)
		}
	})

	t.Run("a model switch gets the tool history as plain text", func(t *testing.T) {
		sent := []json.RawMessage{system, user(t, "what is in a.txt?"),
			toolCall(t, "c1", "read_file", map[string]interface{}{"path": "a.txt"}), toolResult(t, "c1", "hello")}
		reply, err := fit(ctx, client, &memsvcv1.FitContextRequest{PreviousModel: "claude-3-5-sonnet"}, sent...)
		if err != nil {
			t.Fatal(err)
		}
		if got := stages(reply); !reflect.DeepEqual(got, []string{"check_threshold:unchanged",
			"raw_tool_fallback:compacted"}) {
			t.Fatalf("stages %v", got)
		}
		sameJSON(t, memsvc.FittedMessages(reply)[2:], []json.RawMessage{
			chat(t, map[string]interface{}{"role": "assistant", "content": `[tool call read_file id=c1] {"path":"a.txt"}`}),
			user(t, "[tool result read_file id=c1]\nhello")})
	})
}

func TestFitContextIsRetriedAndNamesItsSession(t *testing.T) {
	client, proxy := throughProxy(t, "FitContext=UNAVAILABLE:2")
	ctx := context.Background()
	if _, err := fit(memsvc.WithRetryCall(ctx, false), client, &memsvcv1.FitContextRequest{}, system); !errors.Is(err,
		memsvc.ErrUnavailable) {
		t.Fatalf("WithRetryCall(false): %v", err)
	}
	if reply, err := fit(ctx, client, &memsvcv1.FitContextRequest{}, system); err != nil || !reply.GetFits() {
		t.Fatalf("FitContext after UNAVAILABLE: %v %v", reply, err)
	}
	client.Close()
	calls, err := proxy.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 3 {
		t.Fatalf("want 3 calls (one not retried, one retried once), got %v", calls)
	}
	for _, call := range calls {
		if call.Metadata[memsvc.SessionMetadata] != "s" || call.DeadlineSeconds == nil ||
			*call.DeadlineSeconds < memsvc.FitTimeout.Seconds()-60 {
			t.Fatalf("call %s carried %v, deadline %v", call.Method, call.Metadata, call.DeadlineSeconds)
		}
	}
}

func TestFitContextWaitsFiveMinutesByDefault(t *testing.T) {
	for _, tc := range []struct {
		options []memsvc.Option
		want    time.Duration
	}{{nil, memsvc.FitTimeout}, {[]memsvc.Option{memsvc.WithTimeout(10 * time.Minute)}, 10 * time.Minute}} {
		target, calls := silentServer(t)
		client, err := memsvc.Dial(target, tc.options...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan error, 1)
		go func() {
			_, err := client.FitContext(ctx, &memsvcv1.FitContextRequest{SessionId: "s", Model: "gpt-4o",
				Messages: memsvc.ChatMessages([]json.RawMessage{system})})
			result <- err
		}()
		call := <-calls
		cancel()
		<-result
		client.Close()
		if call.method != "/memsvc.v1.FitService/FitContext" || !call.hasDeadline || call.deadline > tc.want ||
			call.deadline < tc.want-time.Minute {
			t.Fatalf("%s: deadline %v, want %v", call.method, call.deadline, tc.want)
		}
		if got := fmt.Sprint(call.metadata.Get(memsvc.SessionMetadata)); got != "[s]" {
			t.Fatalf("session metadata %s", got)
		}
	}
}
