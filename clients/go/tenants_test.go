package memsvc_test

// Tenants end to end: a real memsvc with a tenants file, tokens of two tenants
// and an admin of every tenant who names the tenant with WithTenant, on unary
// calls and on streams.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/ioutil"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	memsvc "memsvc.dev/clients/go"
	"memsvc.dev/clients/go/memsvcv1"
)

// writeTenants writes a tenants file of (token, tenant, role) entries: only each token's SHA-256.
func writeTenants(t *testing.T, tokens [][3]string) string {
	t.Helper()
	var file strings.Builder
	for _, entry := range tokens {
		digest := sha256.Sum256([]byte(entry[0]))
		fmt.Fprintf(&file, "[[tokens]]\nsha256 = %q\ntenant = %q\nrole = %q\n\n", hex.EncodeToString(digest[:]),
			entry[1], entry[2])
	}
	path := filepath.Join(t.TempDir(), "tenants.toml")
	if err := ioutil.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTenants(t *testing.T) {
	server := start(t, "--tenants-file", writeTenants(t, [][3]string{
		{"alpha-writer-token", "alpha", "write"}, {"beta-writer-token", "beta", "write"},
		{"every-tenant-admin", "*", "admin"}}))
	alpha := dial(t, server.TCP, memsvc.WithToken("alpha-writer-token"))
	beta := dial(t, server.Unix, memsvc.WithToken("beta-writer-token"))
	if err := appendOne(alpha, "go-shared", "alpha's secret"); err != nil {
		t.Fatal(err)
	}
	if err := appendOne(beta, "go-shared", "beta's note"); err != nil {
		t.Fatal(err)
	}
	if got := window(t, alpha, "go-shared"); !equal(got, []string{"alpha's secret"}) {
		t.Fatalf("alpha sees %v", got)
	}
	if got := window(t, beta, "go-shared"); !equal(got, []string{"beta's note"}) {
		t.Fatalf("beta sees %v", got)
	}

	// The admin acts for the tenant it names, unary calls and streams alike.
	admin := dial(t, server.TCP, memsvc.WithToken("every-tenant-admin"), memsvc.WithTenant("beta"))
	if got := window(t, admin, "go-shared"); !equal(got, []string{"beta's note"}) {
		t.Fatalf("the admin acting for beta sees %v", got)
	}
	stream, err := admin.ExportSession(context.Background(), &memsvcv1.ExportSessionRequest{SessionId: "go-shared"})
	if err != nil {
		t.Fatal(err)
	}
	var tenant string
	var exported []string
	for {
		part, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if head := part.GetHead(); head != nil {
			tenant = head.GetTenant()
		}
		for _, message := range part.GetMessages() {
			exported = append(exported, message.GetMessage().GetContent())
		}
	}
	if tenant != "beta" || !equal(exported, []string{"beta's note"}) {
		t.Fatalf("the export for beta says tenant %q, messages %v", tenant, exported)
	}
	unnamed := dial(t, server.TCP, memsvc.WithToken("every-tenant-admin"))
	refusedWith(t, appendOne(dial(t, server.TCP, memsvc.WithToken("every-tenant-admin"), memsvc.WithTenant("gamma")),
		"go-shared", "no such tenant"), codes.PermissionDenied, "TENANT_FORBIDDEN")
	if got := window(t, unnamed, "go-shared"); len(got) != 0 {
		t.Fatalf("naming no tenant, the admin acts for the default one, which has no go-shared; it read %v", got)
	}

	// A tenant's own token may not name another tenant.
	refusedWith(t, appendOne(dial(t, server.TCP, memsvc.WithToken("alpha-writer-token"), memsvc.WithTenant("beta")),
		"go-shared", "should not land"), codes.PermissionDenied, "TENANT_FORBIDDEN")
	if got := window(t, beta, "go-shared"); !equal(got, []string{"beta's note"}) {
		t.Fatalf("beta sees %v after alpha's refused append", got)
	}
}
