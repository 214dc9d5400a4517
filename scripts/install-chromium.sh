#!/usr/bin/env bash
# Installs the browser the dashboard tests drive: Debian's chromium
# (/usr/bin/chromium), which Playwright launches through executable_path, so no
# browser is ever downloaded. Does nothing when it is present; must never
# fetch from anywhere but the Debian archive.
set -euo pipefail

if dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q 'ok installed' && [ -x /usr/bin/chromium ]; then
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "the dashboard tests need Debian's chromium package" >&2
  echo "install it as root: apt-get update && apt-get install --no-install-recommends chromium" >&2
  exit 1
fi
echo "installing chromium" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
