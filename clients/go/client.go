// Package memsvc is a thin Go client for memsvc, conversation memory for LLM
// agents served over gRPC.
//
// It owns the connection (TCP or unix socket), the default deadline, the
// bearer token, the tenant an admin of every tenant acts for ("memsvc-tenant"),
// the "memsvc-session" metadata of per-session RPCs, retries
// where the contract allows them, and turning failures into *Error with the
// server's stable ErrorInfo reason. Every RPC is the generated method, called
// with the generated request struct (the struct is the options: a field the
// contract gains needs no code here); it must never hold memory logic.
//
//	client, err := memsvc.Dial("unix:///run/memsvc.sock")
//	reply, err := client.Append(ctx, &memsvcv1.AppendRequest{SessionId: "s1",
//		Messages: []*memsvcv1.Message{memsvc.User("hello")}})
package memsvc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"memsvc.dev/clients/go/memsvcv1"
)

// DefaultTimeout is the deadline of every call whose context has none.
const DefaultTimeout = 10 * time.Second

// Client is a connection to one memsvc server. Every service's generated
// methods are promoted: client.Append, client.GetContext, client.RecordError,
// client.FitContext, client.GetServerInfo... Every error their unary calls
// return is an *Error.
type Client struct {
	memsvcv1.MemoryServiceClient
	memsvcv1.ErrorMemoryServiceClient
	memsvcv1.FitServiceClient
	memsvcv1.ShardServiceClient
	conn *grpc.ClientConn
}

// Option configures Dial.
type Option func(*settings)

type settings struct {
	retry       RetryPolicy
	timeout     time.Duration
	token       string
	tenant      string
	tls         *tls.Config
	dialOptions []grpc.DialOption
}

// WithTimeout sets the deadline of calls whose context has none (default 10 s; FitContext's is
// FitTimeout, unless this is longer).
func WithTimeout(timeout time.Duration) Option {
	return func(s *settings) { s.timeout = timeout }
}

// WithToken sends "authorization: Bearer <token>" on every call, for a server
// started with token_file.
func WithToken(token string) Option {
	return func(s *settings) { s.token = token }
}

// WithTenant sends "memsvc-tenant: <tenant>" on every call, streams included: the
// tenant an admin of every tenant (a tenants file's tenant "*") acts for. Any
// other token may name only its own tenant.
func WithTenant(tenant string) Option {
	return func(s *settings) { s.tenant = tenant }
}

// WithTLS speaks TLS to a TCP target (memsvc serves unix sockets in
// plaintext). TLSConfig builds the config from PEM files' contents; an empty
// &tls.Config{} trusts the system's CAs.
func WithTLS(config *tls.Config) Option {
	return func(s *settings) { s.tls = config }
}

// TLSConfig trusts the server's CA (caPEM; nil for the system's CAs) and,
// for mTLS, presents a client certificate (certPEM and keyPEM, or both nil).
func TLSConfig(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM != nil {
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("memsvc TLS: no certificate in the CA PEM")
		}
	}
	if certPEM != nil || keyPEM != nil {
		certificate, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("memsvc TLS client certificate: %w", err)
		}
		config.Certificates = []tls.Certificate{certificate}
	}
	return config, nil
}

// WithDialOptions adds gRPC dial options (keepalive, message sizes, ...).
func WithDialOptions(options ...grpc.DialOption) Option {
	return func(s *settings) { s.dialOptions = append(s.dialOptions, options...) }
}

// Dial connects lazily to target: "HOST:PORT", "[::1]:PORT", "unix:///abs/path"
// or "unix:relative/path". It fails only on a malformed target; an unreachable
// server shows up as an UNAVAILABLE *Error on the first call.
func Dial(target string, options ...Option) (*Client, error) {
	s := settings{timeout: DefaultTimeout, retry: DefaultRetry}
	for _, option := range options {
		option(&s)
	}
	address, dialer, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	security := grpc.WithInsecure()
	if s.tls != nil {
		if strings.HasPrefix(target, "unix:") {
			return nil, errors.New("memsvc serves unix sockets in plaintext: drop WithTLS for a unix target")
		}
		security = grpc.WithTransportCredentials(credentials.NewTLS(s.tls))
	}
	dialOptions := []grpc.DialOption{
		security,
		grpc.WithContextDialer(dialer),
		grpc.WithChainUnaryInterceptor(defaultDeadline(s.timeout), credentialsUnary(s.token, s.tenant), sessionHeader,
			retrying(s.retry), typedErrors),
		// Streams (ExportSession, ImportSession) carry the same token and tenant.
		grpc.WithChainStreamInterceptor(credentialsStream(s.token, s.tenant)),
	}
	conn, err := grpc.Dial("passthrough:///"+address, append(dialOptions, s.dialOptions...)...)
	if err != nil {
		return nil, err
	}
	return &Client{
		MemoryServiceClient:      memsvcv1.NewMemoryServiceClient(conn),
		ErrorMemoryServiceClient: memsvcv1.NewErrorMemoryServiceClient(conn),
		FitServiceClient:         memsvcv1.NewFitServiceClient(conn),
		ShardServiceClient:       memsvcv1.NewShardServiceClient(conn),
		conn:                     conn,
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close()
}

// User is a user message to append.
func User(content string) *memsvcv1.Message {
	return &memsvcv1.Message{Role: memsvcv1.Role_ROLE_USER, Content: content}
}

// Assistant is an assistant message to append.
func Assistant(content string) *memsvcv1.Message {
	return &memsvcv1.Message{Role: memsvcv1.Role_ROLE_ASSISTANT, Content: content}
}

var hostPort = regexp.MustCompile(`^(\[[0-9a-fA-F:.]+\]|[^:/\s]+):\d+$`)

// parseTarget resolves the target to an address and the dialer reaching it:
// the dialer is ours so unix sockets work with every grpc-go version.
func parseTarget(target string) (string, func(context.Context, string) (net.Conn, error), error) {
	network, address := "tcp", target
	switch {
	case strings.HasPrefix(target, "unix://"):
		network, address = "unix", strings.TrimPrefix(target, "unix://")
	case strings.HasPrefix(target, "unix:"):
		network, address = "unix", strings.TrimPrefix(target, "unix:")
	case !hostPort.MatchString(target):
		return "", nil, fmt.Errorf("memsvc target must be HOST:PORT or unix:///path, got %q", target)
	}
	if address == "" {
		return "", nil, fmt.Errorf("memsvc unix target has no socket path: %q", target)
	}
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	return address, dialer, nil
}

func defaultDeadline(timeout time.Duration) grpc.UnaryClientInterceptor {
	fitTimeout := timeout
	if fitTimeout < FitTimeout {
		fitTimeout = FitTimeout
	}
	return func(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, set := ctx.Deadline(); !set {
			limit := timeout
			if method == fitContext {
				limit = fitTimeout
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// TenantMetadata is the request metadata naming the tenant an admin of every tenant acts for.
const TenantMetadata = "memsvc-tenant"

// withCredentials is ctx carrying the bearer token and the tenant, those that are set.
func withCredentials(ctx context.Context, token, tenant string) context.Context {
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	if tenant != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, TenantMetadata, tenant)
	}
	return ctx
}

func credentialsUnary(token, tenant string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(withCredentials(ctx, token, tenant), method, req, reply, cc, opts...)
	}
}

func credentialsStream(token, tenant string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(withCredentials(ctx, token, tenant), desc, cc, method, opts...)
	}
}

// SessionMetadata is the request metadata naming the session a per-session RPC acts on: a proxy
// in front of several servers routes by it.
const SessionMetadata = "memsvc-session"

// perSession are the services whose session_id names the session a call acts on (RecordError's is
// only provenance), as method-name prefixes.
var perSession = []string{
	"/" + string(memsvcv1.File_memsvc_v1_memory_proto.Services().ByName("MemoryService").FullName()) + "/",
	"/" + string(memsvcv1.File_memsvc_v1_fit_proto.Services().ByName("FitService").FullName()) + "/",
	"/" + string(memsvcv1.File_memsvc_v1_shards_proto.Services().ByName("ShardService").FullName()) + "/",
}

func actsOnSession(method string) bool {
	for _, prefix := range perSession {
		if strings.HasPrefix(method, prefix) {
			return true
		}
	}
	return false
}

// sessionHeader names the session of every per-session RPC whose request has a session id.
func sessionHeader(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if named, ok := req.(interface{ GetSessionId() string }); ok && actsOnSession(method) {
		if id := named.GetSessionId(); id != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, SessionMetadata, SessionHeader(id))
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// SessionHeader is the id as SessionMetadata carries it: its UTF-8 bytes, A-Z a-z 0-9 - . _ ~ as they
// are and every other byte as %XX (upper-case hex), as the Python and Node clients write it; ids made
// only of the first kind travel unchanged.
func SessionHeader(id string) string {
	const hex = "0123456789ABCDEF"
	var encoded strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' ||
			c == '_' || c == '~' {
			encoded.WriteByte(c)
		} else {
			encoded.WriteByte('%')
			encoded.WriteByte(hex[c>>4])
			encoded.WriteByte(hex[c&15])
		}
	}
	return encoded.String()
}

func typedErrors(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return fromStatus(err)
	}
	return nil
}
