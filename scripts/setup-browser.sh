#!/usr/bin/env bash
# The headless browser that scripts/check_report.py opens reports in: Debian's `chromium` and the
# DejaVu fonts, installed with apt-get when `chromium` is not on the PATH (through sudo when not
# root). Quick and idempotent when they are there; prints the version.
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if command -v dpkg-query >/dev/null 2>&1 \
  && ! dpkg-query -W -f='${Status}' fonts-dejavu-core 2>/dev/null | grep -q 'install ok installed'; then
  need+=(fonts-dejavu-core)
fi

if ((${#need[@]})); then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-browser: ${need[*]} missing and there is no apt-get here; install Chromium (a \`chromium\` on the PATH) and the DejaVu fonts by hand" >&2
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "setup-browser: ${need[*]} missing; as root, run:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${need[*]}" >&2
    exit 1
  fi
  echo "setup-browser: installing ${need[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
  command -v chromium >/dev/null 2>&1 || { echo "setup-browser: apt-get ran, but there is still no chromium on the PATH" >&2; exit 1; }
fi

# Debian's launcher script prints a harmless shell warning on stderr; the version is on stdout
version=$(chromium --version 2>/dev/null) || { echo "setup-browser: \`chromium --version\` failed" >&2; exit 1; }
echo "setup-browser: ${version} ($(command -v chromium))"
