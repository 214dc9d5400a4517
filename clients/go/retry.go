package memsvc

// This file owns retries as the contract allows them: after UNAVAILABLE only, for the RPCs whose
// idempotency_level is set (Append and ReplaceMessages only with an IdempotencyKey, DeleteMessages only with Ids; any
// RPC the caller asks for with WithRetryCall), with capped exponential backoff and full jitter, within the call's deadline.
// It must never decide anything about requests or results.

import (
	"context"
	"math/rand"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"memsvc.dev/clients/go/memsvcv1"
)

// RetryPolicy says how often and how long to wait: Attempts counts the first call too; waits
// grow from InitialBackoff by Multiplier up to MaxBackoff, each drawn below that bound.
type RetryPolicy struct {
	Attempts       int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Multiplier     float64
}

// DefaultRetry is the policy of a client dialed without WithRetry.
var DefaultRetry = RetryPolicy{Attempts: 4, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
	Multiplier: 2}

// WithRetry sets the retry policy; WithRetry(RetryPolicy{Attempts: 1}) turns retries off.
func WithRetry(policy RetryPolicy) Option {
	return func(s *settings) { s.retry = policy }
}

type retryKey struct{}

// WithRetryCall overrides, for calls made with the returned context, the contract's word on
// retrying: true retries even Summarize or an Append without a key, false retries nothing.
func WithRetryCall(ctx context.Context, retry bool) context.Context {
	return context.WithValue(ctx, retryKey{}, retry)
}

// retrySafe holds, by full method name, whether the contract marks the RPC safe to retry.
var retrySafe = func() map[string]bool {
	safe := map[string]bool{}
	for _, file := range []protoreflect.FileDescriptor{memsvcv1.File_memsvc_v1_memory_proto,
		memsvcv1.File_memsvc_v1_error_memory_proto, memsvcv1.File_memsvc_v1_fit_proto} {
		for i := 0; i < file.Services().Len(); i++ {
			service := file.Services().Get(i)
			for j := 0; j < service.Methods().Len(); j++ {
				method := service.Methods().Get(j)
				options, _ := method.Options().(*descriptorpb.MethodOptions)
				safe["/"+string(service.FullName())+"/"+string(method.Name())] =
					options.GetIdempotencyLevel() != descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN
			}
		}
	}
	return safe
}()

func retrying(policy RetryPolicy) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		safe := retrySafe[method]
		if keyed, ok := req.(*memsvcv1.AppendRequest); ok && keyed.GetIdempotencyKey() != "" {
			safe = true
		}
		if keyed, ok := req.(*memsvcv1.ReplaceMessagesRequest); ok && keyed.GetIdempotencyKey() != "" {
			safe = true
		}
		if named, ok := req.(*memsvcv1.DeleteMessagesRequest); ok && len(named.GetIds()) > 0 {
			safe = true // a repeat deletes nothing more
		}
		if asked, ok := ctx.Value(retryKey{}).(bool); ok {
			safe = asked
		}
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || !safe || status.Code(err) != codes.Unavailable || attempt >= policy.Attempts {
				return err
			}
			bound := float64(policy.InitialBackoff)
			for i := 1; i < attempt; i++ {
				bound *= policy.Multiplier
			}
			if bound > float64(policy.MaxBackoff) {
				bound = float64(policy.MaxBackoff)
			}
			wait := time.NewTimer(time.Duration(rand.Float64() * bound))
			select {
			case <-ctx.Done():
				wait.Stop()
				return err
			case <-wait.C:
			}
		}
	}
}
