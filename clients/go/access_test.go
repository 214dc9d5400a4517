package memsvc_test

// The bearer token and TLS, end to end through real memsvc servers started
// with token_file and the tls_* settings; certificates come from a throwaway
// CA made here with crypto/x509.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io/ioutil"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	memsvc "memsvc.dev/clients/go"
	"memsvc.dev/clients/go/internal/testserver"
	"memsvc.dev/clients/go/memsvcv1"
)

func start(t *testing.T, args ...string) *testserver.Server {
	t.Helper()
	server, err := testserver.Start(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	return server
}

func dial(t *testing.T, target string, options ...memsvc.Option) *memsvc.Client {
	t.Helper()
	client, err := memsvc.Dial(target, options...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func appendOne(client *memsvc.Client, session, content string) error {
	_, err := client.Append(context.Background(), &memsvcv1.AppendRequest{SessionId: session,
		Messages: []*memsvcv1.Message{memsvc.User(content)}})
	return err
}

func window(t *testing.T, client *memsvc.Client, session string) []string {
	t.Helper()
	reply, err := client.GetContext(context.Background(), &memsvcv1.GetContextRequest{SessionId: session})
	if err != nil {
		t.Fatal(err)
	}
	return contents(reply.GetWindow())
}

func refusedWith(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	failure, ok := memsvc.AsError(err)
	if !ok || failure.Code != code || failure.Reason != reason {
		t.Fatalf("want %s %q, got %v", memsvc.CodeName(code), reason, err)
	}
}

func TestBearerToken(t *testing.T) {
	const token = "s3cret-token-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := ioutil.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := start(t, "--token-file", tokenFile)

	for _, target := range []string{server.TCP, server.Unix} {
		if err := appendOne(dial(t, target, memsvc.WithToken(token)), "go-guarded", "via "+target); err != nil {
			t.Fatal(err)
		}
	}
	refusedWith(t, appendOne(dial(t, server.TCP), "go-guarded", "should not land"),
		codes.Unauthenticated, "MISSING_TOKEN")
	refusedWith(t, appendOne(dial(t, server.Unix, memsvc.WithToken(token+"x")), "go-guarded", "should not land"),
		codes.Unauthenticated, "INVALID_TOKEN")
	if got := window(t, dial(t, server.TCP, memsvc.WithToken(token)), "go-guarded"); len(got) != 2 {
		t.Fatalf("window %v", got)
	}
}

// authority is a throwaway CA issuing P-256 certificates.
type authority struct {
	key         *ecdsa.PrivateKey
	certificate *x509.Certificate
	pem         []byte
}

func newAuthority(t *testing.T, name string) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certificate, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &authority{key, certificate, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns (certificate PEM, key PEM) for 127.0.0.1 and localhost.
func (a *authority) issue(t *testing.T, usage x509.ExtKeyUsage) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	template := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "memsvc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, template, a.certificate, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func writeFiles(t *testing.T, files map[string][]byte) string {
	t.Helper()
	directory := t.TempDir()
	for name, content := range files {
		if err := ioutil.WriteFile(filepath.Join(directory, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return directory
}

func tlsOption(t *testing.T, ca, cert, key []byte) memsvc.Option {
	t.Helper()
	config, err := memsvc.TLSConfig(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return memsvc.WithTLS(config)
}

func TestTLS(t *testing.T) {
	ca := newAuthority(t, "memsvc test CA")
	serverCert, serverKey := ca.issue(t, x509.ExtKeyUsageServerAuth)
	directory := writeFiles(t, map[string][]byte{"server.crt": serverCert, "server.key": serverKey, "ca.crt": ca.pem})
	tlsFlags := []string{"--tls-cert-file", filepath.Join(directory, "server.crt"),
		"--tls-key-file", filepath.Join(directory, "server.key")}
	short := memsvc.WithTimeout(5 * time.Second)

	t.Run("TCP over TLS for a client trusting the CA, the unix socket in plaintext", func(t *testing.T) {
		server := start(t, tlsFlags...)
		if err := appendOne(dial(t, server.TCP, tlsOption(t, ca.pem, nil, nil)), "go-tls", "encrypted"); err != nil {
			t.Fatal(err)
		}
		if got := window(t, dial(t, server.Unix), "go-tls"); !equal(got, []string{"encrypted"}) {
			t.Fatalf("window %v", got)
		}
		other := newAuthority(t, "someone else")
		refusedWith(t, appendOne(dial(t, server.TCP, tlsOption(t, other.pem, nil, nil), short), "go-tls", "x"),
			codes.Unavailable, "")
		refusedWith(t, appendOne(dial(t, server.TCP, short), "go-tls", "x"), codes.Unavailable, "")
		if got := window(t, dial(t, server.Unix), "go-tls"); !equal(got, []string{"encrypted"}) {
			t.Fatalf("a refused client changed the session: %v", got)
		}
		config, _ := memsvc.TLSConfig(ca.pem, nil, nil)
		if _, err := memsvc.Dial(server.Unix, memsvc.WithTLS(config)); err == nil {
			t.Fatal("Dial accepted TLS for a unix target")
		}
	})

	t.Run("mTLS admits only clients with a certificate the client CA signed", func(t *testing.T) {
		server := start(t, append(tlsFlags, "--tls-client-ca-file", filepath.Join(directory, "ca.crt"))...)
		refusedWith(t, appendOne(dial(t, server.TCP, tlsOption(t, ca.pem, nil, nil), short), "go-mtls", "x"),
			codes.Unavailable, "")
		clientCert, clientKey := ca.issue(t, x509.ExtKeyUsageClientAuth)
		member := dial(t, server.TCP, tlsOption(t, ca.pem, clientCert, clientKey))
		if err := appendOne(member, "go-mtls", "mutually trusted"); err != nil {
			t.Fatal(err)
		}
		if got := window(t, member, "go-mtls"); !equal(got, []string{"mutually trusted"}) {
			t.Fatalf("window %v", got)
		}
	})

	t.Run("TLSConfig rejects PEM without a certificate", func(t *testing.T) {
		if _, err := memsvc.TLSConfig([]byte("not a certificate"), nil, nil); err == nil {
			t.Fatal("accepted")
		}
		if _, err := memsvc.TLSConfig(nil, serverCert, nil); err == nil {
			t.Fatal("accepted a certificate without its key")
		}
	})
}
