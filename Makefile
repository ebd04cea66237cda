# make test runs every test: it first makes sure Postgres, Redis and an S3 server are there
# (scripts/services.sh), then checks formatting and vet, then runs the whole suite with the race
# detector. SVC_TEST_REQUIRE_SERVICES=1 turns a missing service into a failure, not a skip.
GO ?= go
PKGS ?= ./...
TESTFLAGS ?= -race -count=1 -timeout 20m
# The AI SDK (npm ai@5) the resume test drives; make services installs it there.
SVC_TEST_AISDK_DIR ?= $(HOME)/.cache/svc-aisdk
export SVC_TEST_AISDK_DIR

.PHONY: test services check build run bench

test: services check
	SVC_TEST_REQUIRE_SERVICES=1 $(GO) test $(TESTFLAGS) $(PKGS)

services:
	@scripts/services.sh

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

build:
	$(GO) build -o bin/svc ./cmd/svc

run:
	$(GO) run ./cmd/svc up

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
