#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the dashboard's browser test:
# installs the chromium package with apt-get when running as root, or stops
# with one line saying what to install.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "--- installing Chromium with apt-get (dashboard browser test)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq chromium >/dev/null
	command -v chromium >/dev/null 2>&1 && exit 0
fi
echo "error: chromium is not installed; install it (Debian: apt-get install chromium) for the dashboard's browser test" >&2
exit 1
