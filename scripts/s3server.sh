#!/usr/bin/env bash
# Installs versitygw, the S3 server that the tests start
# (registry/s3objects/s3test), into $(go env GOPATH)/bin unless the pinned
# version is already there, and prints the binary's path.
# Idempotent: a second run does nothing but print the path.
#
# Usage: scripts/s3server.sh
# Then:  go test ./registry/s3objects/...   (or set SVC_S3_SERVER_BIN to the path)
set -euo pipefail

VERSION=v1.8.0
MODULE=github.com/versity/versitygw
PACKAGE=$MODULE/cmd/versitygw

fail() {
	echo "s3server.sh: $*" >&2
	exit 1
}

command -v go >/dev/null 2>&1 || fail "go is not in PATH; install Go first"
gopath=$(go env GOPATH) || fail "'go env GOPATH' failed"
[ -n "$gopath" ] || fail "'go env GOPATH' is empty"
gobin="${gopath%%:*}/bin" # the first GOPATH entry, as go install uses
bin="$gobin/versitygw"

# installed_version prints the module version the binary was built from.
installed_version() {
	go version -m "$1" 2>/dev/null | awk -v m="$MODULE" '$1 == "mod" && $2 == m { print $3 }'
}

if [ -x "$bin" ] && [ "$(installed_version "$bin")" = "$VERSION" ]; then
	echo "$bin"
	exit 0
fi

if [ -x "$bin" ]; then
	echo "s3server.sh: replacing versitygw $(installed_version "$bin") with $VERSION" >&2
else
	echo "s3server.sh: installing versitygw $VERSION into $gobin (about a minute on a cold cache)" >&2
fi
# GOFLAGS is cleared so that a project setting such as -mod=vendor cannot
# break an install of another module.
if ! GOFLAGS='' GOBIN="$gobin" go install "$PACKAGE@$VERSION" >&2; then
	fail "go install $PACKAGE@$VERSION failed (is the Go module proxy reachable?)"
fi
[ -x "$bin" ] || fail "go install succeeded but $bin is missing"
[ "$(installed_version "$bin")" = "$VERSION" ] || fail "$bin is not version $VERSION after install"
"$bin" --version >/dev/null 2>&1 || fail "$bin does not run"
echo "$bin"
