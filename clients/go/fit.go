package memsvc

// This file owns what FitContext needs beyond the generated call: its longer default deadline
// (the stages may wait for the summary model) and the run's messages between json.RawMessage,
// as a chat-completions client holds them, and the contract's JSON strings. It must never look
// inside a message: the server decides what a run means.

import (
	"encoding/json"
	"time"

	"memsvc.dev/clients/go/memsvcv1"
)

// FitTimeout is FitContext's deadline when its context has none, or WithTimeout's when longer:
// its stages may wait for the summary model.
const FitTimeout = 5 * time.Minute

var fitContext = "/" + string(memsvcv1.File_memsvc_v1_fit_proto.Services().ByName("FitService").FullName()) +
	"/FitContext"

// ChatMessages is a run's chat-completions messages, each one JSON object, as
// FitContextRequest.Messages takes them: their bytes unchanged.
func ChatMessages(messages []json.RawMessage) []string {
	out := make([]string, len(messages))
	for i, message := range messages {
		out[i] = string(message)
	}
	return out
}

// FittedMessages is a FitContext reply's messages as json.RawMessage, ready for a
// chat-completions request; the ones no stage changed are the bytes that were sent.
func FittedMessages(reply *memsvcv1.FitContextResponse) []json.RawMessage {
	out := make([]json.RawMessage, len(reply.GetMessages()))
	for i, message := range reply.GetMessages() {
		out[i] = json.RawMessage(message)
	}
	return out
}
