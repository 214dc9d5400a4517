// Command conformance is the Go side of the cross-language conformance
// scenario (clients/conformance/scenario.json): it runs each step through
// the memsvc client and prints one proto3-JSON result per step. Usage:
//
//	conformance SCENARIO TARGET SESSION
//
// It must never interpret results: tests/e2e/test_conformance.py compares them.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	memsvc "memsvc.dev/clients/go"
	"memsvc.dev/clients/go/memsvcv1"
)

type step struct {
	Name    string          `json:"name"`
	RPC     string          `json:"rpc"`
	Request json.RawMessage `json:"request"`
}

type failure struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

type result struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response,omitempty"`
	Error    *failure        `json:"error,omitempty"`
}

// runner parses a step's request, makes the call and returns the response.
type runner func(ctx context.Context, client *memsvc.Client, request []byte) (proto.Message, error)

func rpc(newRequest func() proto.Message, call func(context.Context, *memsvc.Client, proto.Message) (proto.Message, error)) runner {
	return func(ctx context.Context, client *memsvc.Client, json []byte) (proto.Message, error) {
		request := newRequest()
		if err := protojson.Unmarshal(json, request); err != nil {
			return nil, fmt.Errorf("scenario request: %w", err)
		}
		return call(ctx, client, request)
	}
}

var runners = map[string]runner{
	"Append": rpc(func() proto.Message { return &memsvcv1.AppendRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.Append(ctx, r.(*memsvcv1.AppendRequest))
		}),
	"GetContext": rpc(func() proto.Message { return &memsvcv1.GetContextRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.GetContext(ctx, r.(*memsvcv1.GetContextRequest))
		}),
	"Search": rpc(func() proto.Message { return &memsvcv1.SearchRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.Search(ctx, r.(*memsvcv1.SearchRequest))
		}),
	"Compact": rpc(func() proto.Message { return &memsvcv1.CompactRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.Compact(ctx, r.(*memsvcv1.CompactRequest))
		}),
	"Summarize": rpc(func() proto.Message { return &memsvcv1.SummarizeRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.Summarize(ctx, r.(*memsvcv1.SummarizeRequest))
		}),
	"GetSummary": rpc(func() proto.Message { return &memsvcv1.GetSummaryRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.GetSummary(ctx, r.(*memsvcv1.GetSummaryRequest))
		}),
	"Reset": rpc(func() proto.Message { return &memsvcv1.ResetRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.Reset(ctx, r.(*memsvcv1.ResetRequest))
		}),
	"RemoveSession": rpc(func() proto.Message { return &memsvcv1.RemoveSessionRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.RemoveSession(ctx, r.(*memsvcv1.RemoveSessionRequest))
		}),
	"GetServerInfo": rpc(func() proto.Message { return &memsvcv1.GetServerInfoRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.GetServerInfo(ctx, r.(*memsvcv1.GetServerInfoRequest))
		}),
	"ListMessages": rpc(func() proto.Message { return &memsvcv1.ListMessagesRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.ListMessages(ctx, r.(*memsvcv1.ListMessagesRequest))
		}),
	"DeleteMessages": rpc(func() proto.Message { return &memsvcv1.DeleteMessagesRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.DeleteMessages(ctx, r.(*memsvcv1.DeleteMessagesRequest))
		}),
	"ReplaceMessages": rpc(func() proto.Message { return &memsvcv1.ReplaceMessagesRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.ReplaceMessages(ctx, r.(*memsvcv1.ReplaceMessagesRequest))
		}),
	"FitContext": rpc(func() proto.Message { return &memsvcv1.FitContextRequest{} },
		func(ctx context.Context, c *memsvc.Client, r proto.Message) (proto.Message, error) {
			return c.FitContext(ctx, r.(*memsvcv1.FitContextRequest))
		}),
}

func run(scenarioPath, target, session string) ([]result, error) {
	raw, err := ioutil.ReadFile(scenarioPath)
	if err != nil {
		return nil, err
	}
	var scenario struct {
		Steps []step `json:"steps"`
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "{session}", session)), &scenario); err != nil {
		return nil, err
	}
	client, err := memsvc.Dial(target)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var results []result
	for _, s := range scenario.Steps {
		call, found := runners[s.RPC]
		if !found {
			return nil, fmt.Errorf("no runner for %s", s.RPC)
		}
		response, err := call(context.Background(), client, s.Request)
		if err != nil {
			failed, isMemsvc := memsvc.AsError(err)
			if !isMemsvc {
				return nil, err
			}
			results = append(results, result{Name: s.Name, Error: &failure{memsvc.CodeName(failed.Code), failed.Reason}})
			continue
		}
		encoded, err := protojson.Marshal(response)
		if err != nil {
			return nil, err
		}
		results = append(results, result{Name: s.Name, Response: encoded})
	}
	return results, nil
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: conformance SCENARIO TARGET SESSION")
		os.Exit(2)
	}
	results, err := run(os.Args[1], os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string][]result{"results": results}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
