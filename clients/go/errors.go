package memsvc

// This file owns *Error: a failed call as its status code plus the stable
// google.rpc.ErrorInfo reason the server attaches to every error (carried in
// the grpc-status-details-bin trailer). It must never decide retries.

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failed memsvc call. Switch on Code and Reason; Message is for people.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Reason is the stable UPPER_SNAKE reason, e.g. "INVALID_SESSION_ID"; "" when the server sent none.
	Reason string
	// Message is the server's explanation.
	Message string
	// Metadata holds the ErrorInfo's extra facts (a limit, ...), if any.
	Metadata map[string]string
	status   *status.Status
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s", CodeName(e.Code), e.Reason, e.Message)
}

// GRPCStatus keeps status.Code(err) and status.FromError(err) working on *Error.
func (e *Error) GRPCStatus() *status.Status {
	return e.status
}

// Is makes errors.Is(err, memsvc.ErrNotFound) true for every *Error of that code: the sentinels
// below stand for one status code each, whatever the reason.
func (e *Error) Is(target error) bool {
	sentinel, ok := target.(*Error)
	return ok && sentinel.status == nil && sentinel.Code == e.Code
}

// One sentinel per status code, for errors.Is.
var (
	ErrCanceled           = &Error{Code: codes.Canceled}
	ErrUnknown            = &Error{Code: codes.Unknown}
	ErrInvalidArgument    = &Error{Code: codes.InvalidArgument}
	ErrDeadlineExceeded   = &Error{Code: codes.DeadlineExceeded}
	ErrNotFound           = &Error{Code: codes.NotFound}
	ErrAlreadyExists      = &Error{Code: codes.AlreadyExists}
	ErrPermissionDenied   = &Error{Code: codes.PermissionDenied}
	ErrResourceExhausted  = &Error{Code: codes.ResourceExhausted}
	ErrFailedPrecondition = &Error{Code: codes.FailedPrecondition}
	ErrAborted            = &Error{Code: codes.Aborted}
	ErrOutOfRange         = &Error{Code: codes.OutOfRange}
	ErrUnimplemented      = &Error{Code: codes.Unimplemented}
	ErrInternal           = &Error{Code: codes.Internal}
	ErrUnavailable        = &Error{Code: codes.Unavailable}
	ErrDataLoss           = &Error{Code: codes.DataLoss}
	ErrUnauthenticated    = &Error{Code: codes.Unauthenticated}
)

// AsError returns the *Error inside err, if there is one.
func AsError(err error) (*Error, bool) {
	var memsvcError *Error
	ok := errors.As(err, &memsvcError)
	return memsvcError, ok
}

// CodeName is the gRPC name of a code, "INVALID_ARGUMENT", as every gRPC language spells it.
func CodeName(code codes.Code) string {
	if code == codes.OK {
		return "OK" // not "O_K"
	}
	return toUpperSnake(code.String())
}

func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	result := &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, detail := range st.Details() {
		if info, isInfo := detail.(*errdetails.ErrorInfo); isInfo {
			result.Reason, result.Metadata = info.GetReason(), info.GetMetadata()
		}
	}
	return result
}

// toUpperSnake turns grpc-go's "InvalidArgument" into "INVALID_ARGUMENT".
func toUpperSnake(name string) string {
	var out strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			out.WriteByte('_')
		}
		out.WriteRune(unicode.ToUpper(r))
	}
	return out.String()
}
