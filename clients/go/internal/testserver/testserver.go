// Package testserver starts a real memsvc server (`python -m memsvc serve`)
// on an ephemeral TCP port and a unix socket over a fresh data directory,
// for tests. It mirrors tests/conftest.py and must never fake the server.
package testserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const startTimeout = 30 * time.Second

// Server is a running memsvc.
type Server struct {
	TCP, Unix string
	cmd       *exec.Cmd
	directory string
}

// RepoRoot finds the memsvc checkout: $MEMSVC_ROOT, or two levels above the
// real (symlink-resolved) directory of the package under test.
func RepoRoot() (string, error) {
	if root := os.Getenv("MEMSVC_ROOT"); root != "" {
		return root, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(wd)
	if err != nil {
		return "", err
	}
	for dir := real; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "memsvc", "__main__.py")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no memsvc checkout above %s; set MEMSVC_ROOT", real)
}

// interpreter is the checkout and the Python that runs memsvc there: $MEMSVC_PYTHON, or its .venv's.
func interpreter() (root, python string, err error) {
	if root, err = RepoRoot(); err != nil {
		return "", "", err
	}
	if python = os.Getenv("MEMSVC_PYTHON"); python == "" {
		python = filepath.Join(root, ".venv", "bin", "python")
	}
	return root, python, nil
}

// Start runs the server and waits for its "serving" log line.
func Start(args ...string) (*Server, error) {
	root, python, err := interpreter()
	if err != nil {
		return nil, err
	}
	directory, err := ioutil.TempDir("", "memsvc-go-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(python, append([]string{"-m", "memsvc", "serve",
		"--data-dir", filepath.Join(directory, "data"),
		"--listen", "127.0.0.1:0", "--listen", "unix://" + filepath.Join(directory, "sock")}, args...)...)
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(directory)
		return nil, err
	}
	server := &Server{cmd: cmd, directory: directory}
	addresses := make(chan []string, 1)
	var log []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		lines := bufio.NewScanner(stderr)
		lines.Buffer(make([]byte, 1<<16), 1<<24)
		for lines.Scan() { // keep draining after startup so the server never blocks on a full pipe
			line := lines.Text()
			var entry struct {
				Event     string   `json:"event"`
				Addresses []string `json:"addresses"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Event == "serving" {
				addresses <- entry.Addresses
			} else if len(log) < 200 {
				log = append(log, line)
			}
		}
	}()
	select {
	case found := <-addresses:
		for _, address := range found {
			if strings.HasPrefix(address, "unix://") {
				server.Unix = address
			} else {
				server.TCP = address
			}
		}
		return server, nil
	case <-done:
		server.Stop()
		return nil, fmt.Errorf("memsvc exited before serving:\n%s", strings.Join(log, "\n"))
	case <-time.After(startTimeout):
		server.Stop()
		<-done
		return nil, fmt.Errorf("memsvc did not start in %s:\n%s", startTimeout, strings.Join(log, "\n"))
	}
}

// Stop sends SIGTERM, waits for the exit and removes the data directory.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	os.RemoveAll(s.directory)
}

// Call is one call the recording proxy saw.
type Call struct {
	Method   string            `json:"method"`
	Metadata map[string]string `json:"metadata"`
	// DeadlineSeconds is what was left of the caller's deadline on arrival; nil without one.
	DeadlineSeconds *float64 `json:"deadline_seconds"`
}

// Proxy is the repo's recording gRPC proxy (tests/support/grpc_proxy.py) in front of a server.
type Proxy struct {
	Target string
	cmd    *exec.Cmd
	lines  chan string
}

// StartProxy runs the proxy in front of upstream; each fail rule is METHOD=CODE:TIMES, answered
// by the proxy instead of forwarded.
func StartProxy(upstream string, fail ...string) (*Proxy, error) {
	root, python, err := interpreter()
	if err != nil {
		return nil, err
	}
	args := []string{"-m", "tests.support.grpc_proxy", upstream}
	for _, rule := range fail {
		args = append(args, "--fail", rule)
	}
	cmd := exec.Command(python, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GRPC_VERBOSITY=ERROR")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	proxy := &Proxy{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(proxy.lines)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			proxy.lines <- lines.Text()
		}
	}()
	select {
	case line, ok := <-proxy.lines:
		var entry struct {
			Target string `json:"target"`
		}
		if !ok || json.Unmarshal([]byte(line), &entry) != nil || entry.Target == "" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("the proxy did not start: %q", line)
		}
		proxy.Target = entry.Target
		return proxy, nil
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the proxy did not start in %s", startTimeout)
	}
}

// Stop stops the proxy and returns the calls it saw, in order.
func (p *Proxy) Stop() ([]Call, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	var calls []Call
	for line := range p.lines {
		var call Call
		if err := json.Unmarshal([]byte(line), &call); err != nil {
			return nil, err
		}
		calls = append(calls, call)
	}
	return calls, p.cmd.Wait()
}
