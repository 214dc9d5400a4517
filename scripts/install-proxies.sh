#!/usr/bin/env bash
# Installs Debian's HAProxy and nginx for the sharding tests and benchmark,
# which start proxies of their own from deploy/haproxy/haproxy.cfg and
# deploy/nginx/nginx.conf on free ports (tests/support/haproxy.py, nginx.py).
# Does nothing when both are present; leaves no service running (Debian's
# packages would otherwise start one each with its default configuration and
# keep it up); must never fetch from anywhere but the Debian archive.
set -euo pipefail

missing=()
for package in haproxy nginx; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "the sharding tests need Debian's ${missing[*]} package(s)" >&2
  echo "install as root: apt-get update && apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
# invoke-rc.d asks policy-rc.d whether a package may start its service: 101 says no. An
# existing policy is the machine's and is left as it was.
policy=/usr/sbin/policy-rc.d
added=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  added=1
fi
trap 'if [ -n "$added" ]; then rm -f "$policy"; fi' EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
