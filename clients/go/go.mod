// Module mode is for users of the client. In this repo the client builds in
// GOPATH mode against Debian's packages (see README): there is no module
// proxy to fill go.sum here, so run `go mod tidy` once when you adopt it.
module memsvc.dev/clients/go

go 1.19

require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
