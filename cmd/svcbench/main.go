package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"
	"unicode"
)

// MaxDuration bounds -d.
const MaxDuration = 10 * time.Minute

type config struct {
	url          string
	token        string
	host         string // Host header instead of url's host
	concurrency  int
	duration     time.Duration
	warmup       time.Duration
	message      string
	pid          int
	fakeAddr     string
	fakeTLS      string // certificate file: the fake serves TLS, HTTP/2 by ALPN
	chunks       int
	hold         bool
	perChunk     bool
	chunkDelay   time.Duration
	idleSessions int
	openStreams  int
	turnsPerSess int
	holdFor      time.Duration
	otlpSink     string
}

func main() {
	var c config
	flag.StringVar(&c.url, "url", "", "runtime base URL, such as http://127.0.0.1:3847")
	flag.StringVar(&c.host, "host", "", "Host header to send instead of -url's host, such as hello.apps.localhost:8080 with -url http://127.0.0.1:8080 (a platform's agent host the resolver does not know)")
	flag.StringVar(&c.token, "token", os.Getenv("SVC_BENCH_TOKEN"), "bearer token for the runtime (env SVC_BENCH_TOKEN)")
	flag.IntVar(&c.concurrency, "c", 16, "concurrent clients")
	flag.DurationVar(&c.duration, "d", 10*time.Second, "measured duration (at most 10m)")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured warm-up before the measured duration")
	flag.StringVar(&c.message, "message", "Say hello", "message of each turn")
	flag.IntVar(&c.turnsPerSess, "turns-per-session", 1, "turns in one session before a client starts a new one")
	flag.IntVar(&c.pid, "pid", 0, "process id of the runtime: report its CPU time per turn and resident memory (Linux /proc)")
	flag.StringVar(&c.fakeAddr, "fake-openai", "", "serve a fake OpenAI API on this address (base URL http://ADDR/v1)")
	flag.StringVar(&c.fakeTLS, "fake-tls", "", "fake: serve HTTPS, HTTP/2 offered by ALPN as the real model APIs do, with a self-signed certificate written to this file (base URL https://ADDR/v1; run the runtime with SSL_CERT_FILE=FILE)")
	flag.IntVar(&c.chunks, "chunks", 32, "text chunks per fake answer")
	flag.BoolVar(&c.hold, "hold", false, "fake: after the first chunk, hold each stream open until the client leaves")
	flag.BoolVar(&c.perChunk, "per-chunk", false, "fake: write each event of an answer on its own, as a real model API does (default: the whole answer at once)")
	flag.DurationVar(&c.chunkDelay, "chunk-delay", 0, "fake, with -per-chunk: pause before each event after the first (at most 1s)")
	flag.IntVar(&c.idleSessions, "idle-sessions", 0, "create this many sessions (one turn each) and report memory per idle session")
	flag.IntVar(&c.openStreams, "open-streams", 0, "open this many streams at once and report memory (run the fake with -hold)")
	flag.DurationVar(&c.holdFor, "hold-for", 0, "with -open-streams: keep the streams open this long after measuring, then measure again (at most 10m; past 2m the runtime has collected its garbage once)")
	flag.StringVar(&c.otlpSink, "otlp-sink", "", "serve an OTLP/HTTP trace receiver on this address that reads and drops every export (OTEL_EXPORTER_OTLP_ENDPOINT=http://ADDR)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(c, log); err != nil {
		fmt.Fprintln(os.Stderr, "svcbench:", err)
		os.Exit(1)
	}
}

func run(c config, log *slog.Logger) error {
	if err := c.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if c.otlpSink != "" {
		sink, err := startOTLPSink(c.otlpSink)
		if err != nil {
			return err
		}
		defer sink.close(log)
		log.Info("OTLP trace sink", "endpoint", "http://"+sink.addr())
		if c.url == "" && c.fakeAddr == "" {
			<-ctx.Done()
			return nil
		}
	}
	if c.fakeAddr != "" {
		o := fakeOptions{chunks: c.chunks, hold: c.hold, perChunk: c.perChunk, delay: c.chunkDelay}
		var fake fakeModel
		scheme := "http"
		if c.fakeTLS != "" {
			tf, err := startTLSFake(c.fakeAddr, c.fakeTLS, o)
			if err != nil {
				return err
			}
			defer func() {
				h2, h1, conns := tf.stats()
				log.Info("fake OpenAI API served", "requests_h2", h2, "requests_h1", h1, "connections", conns)
			}()
			fake, scheme = tf, "https"
		} else {
			f, err := startFake(c.fakeAddr, o)
			if err != nil {
				return err
			}
			fake = f
		}
		defer fake.Close()
		log.Info("fake OpenAI API", "base_url", scheme+"://"+fake.Addr()+"/v1", "tls_cert", c.fakeTLS, "chunks", c.chunks, "hold", c.hold, "per_chunk", c.perChunk, "chunk_delay", c.chunkDelay)
		if c.url == "" {
			<-ctx.Done()
			return nil
		}
	}
	d, err := newDriver(c)
	if err != nil {
		return err
	}
	switch {
	case c.idleSessions > 0:
		return d.idle(ctx)
	case c.openStreams > 0:
		return d.streams(ctx)
	default:
		return d.load(ctx)
	}
}

func (c *config) validate() error {
	switch {
	case c.url == "" && c.fakeAddr == "" && c.otlpSink == "":
		return errors.New("set -url (a runtime to load), -fake-openai (a fake model to serve) or -otlp-sink (a trace receiver to serve)")
	case c.concurrency < 1:
		return fmt.Errorf("-c must be at least 1, got %d", c.concurrency)
	case c.duration <= 0 || c.duration > MaxDuration:
		return fmt.Errorf("-d must be within (0, %s], got %s", MaxDuration, c.duration)
	case c.warmup < 0 || c.warmup > MaxDuration:
		return fmt.Errorf("-warmup must be within [0, %s], got %s", MaxDuration, c.warmup)
	case c.chunks < 1 || c.chunks > 100000:
		return fmt.Errorf("-chunks must be within [1, 100000], got %d", c.chunks)
	case c.chunkDelay < 0 || c.chunkDelay > time.Second:
		return fmt.Errorf("-chunk-delay must be within [0, 1s], got %s", c.chunkDelay)
	case c.chunkDelay > 0 && !c.perChunk:
		return errors.New("-chunk-delay needs -per-chunk")
	case c.fakeTLS != "" && c.fakeAddr == "":
		return errors.New("-fake-tls needs -fake-openai")
	case c.perChunk && c.hold:
		return errors.New("-per-chunk and -hold do not go together")
	case c.holdFor < 0 || c.holdFor > MaxDuration:
		return fmt.Errorf("-hold-for must be within [0, %s], got %s", MaxDuration, c.holdFor)
	case c.turnsPerSess < 1:
		return fmt.Errorf("-turns-per-session must be at least 1, got %d", c.turnsPerSess)
	case c.idleSessions < 0 || c.openStreams < 0:
		return errors.New("-idle-sessions and -open-streams must not be negative")
	case (c.idleSessions > 0 || c.openStreams > 0) && c.url == "":
		return errors.New("-idle-sessions and -open-streams need -url")
	case strings.ContainsFunc(c.token, unicode.IsControl):
		return errors.New("-token must not contain control characters")
	case strings.ContainsFunc(c.host, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || r == '/' }):
		return errors.New("-host must be a host[:port] with no spaces, slashes or control characters")
	case c.host != "" && c.url == "":
		return errors.New("-host needs -url")
	}
	if c.url != "" {
		// The load tool speaks plain HTTP/1.1 itself (rawhttp.go): no https.
		u, err := url.Parse(c.url)
		switch {
		case err != nil:
			return fmt.Errorf("-url: %w", err)
		case u.Scheme != "http" || u.Host == "":
			return fmt.Errorf("-url must be an http:// URL with a host, got %q", c.url)
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			return fmt.Errorf("-url must not have a query, fragment or user, got %q", c.url)
		}
	}
	return nil
}
