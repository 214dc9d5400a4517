#!/usr/bin/env bash
# Installs Debian's HAProxy for the sharding tests and benchmark, which start
# proxies of their own from deploy/haproxy/haproxy.cfg on free ports
# (tests/support/haproxy.py). Does nothing when it is present; leaves no
# service running (Debian's package would otherwise start one with its default
# configuration and keep it up); must never fetch from anywhere but the Debian
# archive.
set -euo pipefail

dpkg-query -W -f='${Status}' haproxy 2>/dev/null | grep -q 'ok installed' && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "the sharding tests need Debian's haproxy package" >&2
  echo "install it as root: apt-get update && apt-get install --no-install-recommends haproxy" >&2
  exit 1
fi
echo "installing haproxy" >&2
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
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null
