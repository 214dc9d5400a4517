#!/usr/bin/env bash
# Installs what generates, builds and tests the Go client, from Debian alone:
# Go 1.19, grpc-go, the protobuf runtimes, genproto (google.rpc.ErrorInfo)
# and protoc's Go plugins. Module mode has no proxy here, so the client builds
# in GOPATH mode against these packages. Does nothing when all are present;
# must never fetch from anywhere but the Debian archive.
set -euo pipefail

packages=(
  golang-go
  golang-google-grpc-dev
  golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev
  golang-google-genproto-dev
  protoc-gen-go
  protoc-gen-go-grpc
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "the Go client needs these Debian packages: ${missing[*]}" >&2
  echo "install them as root: apt-get update && apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
