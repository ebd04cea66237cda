package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"svc/registry/s3objects"
)

// Environment variables that Start reads.
const (
	// EnvEndpoint, when set, names an external S3 server (host:port) to use
	// instead of starting one; EnvAccessKey and EnvSecretKey hold its
	// credentials, EnvUseSSL ("1" or "true") selects https and EnvRegion
	// its region.
	EnvEndpoint = "SVC_TEST_S3_ENDPOINT"
	// EnvAccessKey is the access key of the external server.
	EnvAccessKey = "SVC_TEST_S3_ACCESS_KEY"
	// EnvSecretKey is the secret key of the external server.
	EnvSecretKey = "SVC_TEST_S3_SECRET_KEY"
	// EnvUseSSL selects https for the external server.
	EnvUseSSL = "SVC_TEST_S3_USE_SSL"
	// EnvRegion is the region of the external server.
	EnvRegion = "SVC_TEST_S3_REGION"
	// EnvServerBin is the path of the versitygw binary to start.
	EnvServerBin = "SVC_S3_SERVER_BIN"
	// EnvRequireServices set to "1" (or CI set to anything) makes a missing
	// server fail the test instead of skipping it.
	EnvRequireServices = "SVC_TEST_REQUIRE_SERVICES"
)

// startTimeout bounds how long Start waits for a started server to answer
// its health check.
const startTimeout = 30 * time.Second

// Start returns the Config of an S3 server for t, with a fresh bucket name
// (see FreshBucket). When EnvEndpoint is set it is that server; otherwise
// Start runs versitygw (posix backend, data in a temporary directory) on a
// free port of 127.0.0.1, waits until it is healthy, and stops it when t
// ends. The binary is EnvServerBin, else versitygw in PATH, else
// $(go env GOPATH)/bin/versitygw. Without one, t is skipped with a hint to
// run scripts/s3server.sh, or fails under CI or EnvRequireServices=1.
func Start(t testing.TB) s3objects.Config {
	t.Helper()
	if endpoint := os.Getenv(EnvEndpoint); endpoint != "" {
		useSSL := os.Getenv(EnvUseSSL)
		return FreshBucket(t, s3objects.Config{
			Endpoint:  endpoint,
			AccessKey: os.Getenv(EnvAccessKey),
			SecretKey: os.Getenv(EnvSecretKey),
			UseSSL:    useSSL == "1" || strings.EqualFold(useSSL, "true"),
			Region:    os.Getenv(EnvRegion),
		})
	}
	bin := findBinary(t)
	cfg := s3objects.Config{AccessKey: "svctest", SecretKey: randomHex(t, 16)}
	var lastErr error
	for range 3 { // a free port can be taken between finding and binding it
		addr, err := startServer(t, bin, cfg.AccessKey, cfg.SecretKey)
		if err == nil {
			cfg.Endpoint = addr
			return FreshBucket(t, cfg)
		}
		lastErr = err
	}
	t.Fatalf("s3test: start %s: %v", bin, lastErr)
	return s3objects.Config{}
}

// FreshBucket returns cfg with a new, unique bucket name ("svc-test-" and
// random hex), and removes that bucket and everything in it when t ends, if
// it was created. The Store's New creates it.
func FreshBucket(t testing.TB, cfg s3objects.Config) s3objects.Config {
	t.Helper()
	cfg.Bucket = "svc-test-" + randomHex(t, 6)
	t.Cleanup(func() { removeBucket(t, cfg) })
	return cfg
}

// findBinary locates versitygw, or skips or fails t when there is none.
func findBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvServerBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("s3test: %s=%q: %v", EnvServerBin, bin, err)
		}
		return bin
	}
	if bin, err := exec.LookPath("versitygw"); err == nil {
		return bin
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			bin := filepath.Join(dir, "bin", "versitygw")
			if _, err := os.Stat(bin); err == nil {
				return bin
			}
		}
	}
	msg := "s3test: no S3 server: versitygw is not in " + EnvServerBin +
		", PATH or $(go env GOPATH)/bin; run scripts/s3server.sh to install it, or set " +
		EnvEndpoint + " (with " + EnvAccessKey + " and " + EnvSecretKey + ") to use another server"
	if os.Getenv("CI") != "" || os.Getenv(EnvRequireServices) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startServer runs versitygw on a free loopback port until t ends and
// returns its address once its health check answers.
func startServer(t testing.TB, bin, access, secret string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o750); err != nil {
		return "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	logFile, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return "", err
	}
	defer func() { _ = logFile.Close() }() // the child keeps its own descriptor
	cmd := exec.Command(bin,
		"--access", access, "--secret", secret,
		"--port", addr, "--health", "/health", "--quiet",
		"posix", dataDir)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	proc := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		close(proc.exited)
	}()
	t.Cleanup(func() { proc.stop(t) })

	if err := waitHealthy(addr, proc); err != nil {
		logText, _ := os.ReadFile(logFile.Name()) // best effort, for the message
		return "", fmt.Errorf("%w; server output:\n%s", err, bytes.TrimSpace(logText))
	}
	return addr, nil
}

// waitHealthy polls the server's health endpoint until it answers 200, the
// process exits, or startTimeout passes.
func waitHealthy(addr string, proc *process) error {
	client := &http.Client{Timeout: time.Second}
	url := "http://" + addr + "/health"
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-proc.exited:
			return fmt.Errorf("server exited before it was healthy: %v", proc.err)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			_ = resp.Body.Close() // only the status matters
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("health check answered %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server not healthy at %s after %s: %w", url, startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// process is a started server and the wait for its exit.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returns
	err    error         // cmd.Wait's result; read only after exited is closed
}

// stop asks the server to stop, kills it if it does not within 10 seconds,
// and waits for it to exit.
func (p *process) stop(t testing.TB) {
	select {
	case <-p.exited:
		return // already gone (waitHealthy reported it if it mattered)
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Logf("s3test: interrupt versitygw: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		if err := p.cmd.Process.Kill(); err != nil {
			t.Logf("s3test: kill versitygw: %v", err)
		}
		<-p.exited
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// removeBucket empties and removes cfg's bucket; a bucket that was never
// created is fine. Failures are logged: they leave garbage, not wrong
// results.
func removeBucket(t testing.TB, cfg s3objects.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: cfg.UseSSL,
		Region: cfg.Region,
	})
	if err != nil {
		t.Logf("s3test: remove bucket %s: %v", cfg.Bucket, err)
		return
	}
	for oi := range client.ListObjectsIter(ctx, cfg.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if oi.Err != nil {
			if !isNoSuchBucket(oi.Err) {
				t.Logf("s3test: list bucket %s: %v", cfg.Bucket, oi.Err)
			}
			return
		}
		if err := client.RemoveObject(ctx, cfg.Bucket, oi.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Logf("s3test: remove %s/%s: %v", cfg.Bucket, oi.Key, err)
		}
	}
	if err := client.RemoveBucket(ctx, cfg.Bucket); err != nil && !isNoSuchBucket(err) {
		t.Logf("s3test: remove bucket %s: %v", cfg.Bucket, err)
	}
}

func isNoSuchBucket(err error) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && resp.Code == minio.NoSuchBucket
}

// randomHex returns n random bytes as lowercase hex.
func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("s3test: random: %v", err)
	}
	return hex.EncodeToString(b)
}
