#!/usr/bin/env bash
# Installs Debian's PostgreSQL server for error memory's tests and benchmark,
# which start throwaway servers of their own in temp directories
# (tests/support/postgres.py). Does nothing when it is present; creates no
# cluster and starts no server (Debian's package would otherwise create and
# start a "main" cluster that runs for good); must never fetch from anywhere
# but the Debian archive.
set -euo pipefail

dpkg-query -W -f='${Status}' postgresql 2>/dev/null | grep -q 'ok installed' && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "error memory's PostgreSQL tests need Debian's postgresql package" >&2
  echo "install it as root: apt-get update && apt-get install --no-install-recommends postgresql" >&2
  exit 1
fi
echo "installing postgresql" >&2
apt-get update -qq
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends postgresql-common >/dev/null
sed -ri 's/^#?[[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' \
  /etc/postgresql-common/createcluster.conf
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
