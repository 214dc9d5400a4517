#!/usr/bin/env bash
# Installs the browser the dashboard tests drive: Debian's chromium
# (/usr/bin/chromium), which Playwright launches through executable_path, so no
# browser is ever downloaded, and a font with Han glyphs (WenQuanYi Zen Hei), so
# Chinese messages are drawn, not boxes, in the dashboard's screenshots. Does
# nothing when both are present; must never fetch from anywhere but the
# Debian archive.
set -euo pipefail

if dpkg-query -W -f='${Status}\n' chromium fonts-wqy-zenhei 2>/dev/null | grep -c 'ok installed' | grep -q 2 \
    && [ -x /usr/bin/chromium ]; then
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "the dashboard tests need Debian's chromium package" >&2
  echo "install it as root: apt-get update && apt-get install --no-install-recommends chromium fonts-wqy-zenhei" >&2
  exit 1
fi
echo "installing chromium" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation \
  fonts-wqy-zenhei >/dev/null
