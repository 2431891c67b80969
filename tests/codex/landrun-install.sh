#!/usr/bin/env bash
# Installs landrun (pinned) into /opt/capfs-landrun for the escape comparison, through apt
# alone: a fixed directory every uid can traverse, so that landrun runs as the unprivileged
# user of the table wherever the checkout lies (under a private directory too). Debian ships it only in sid, built against a newer C library than bookworm's, so the
# package and trixie's libc6 are unpacked side by side and landrun is started with that libc's
# own loader; nothing on the host is upgraded. Prints the wrapper's path, or fails.
set -euo pipefail
cd "$(dirname "$0")"
version=0.1.17-1
dest=/opt/capfs-landrun
if [ -x "$dest/landrun" ] && "$dest/landrun" --version 2>/dev/null | grep -q "${version%-*}"; then
  echo "$dest/landrun"
  exit 0
fi
cat > /etc/apt/sources.list.d/capfs-landrun.sources <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
# Nothing from these suites is ever installed: only downloaded and unpacked below.
cat > /etc/apt/preferences.d/capfs-landrun <<'PINS'
Package: *
Pin: release n=trixie
Pin-Priority: -1

Package: *
Pin: release n=sid
Pin-Priority: -1
PINS
apt-get update -qq
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq "landrun=$version" && apt-get download -qq -t trixie libc6) 2>&1 \
  | grep -v 'Download is performed unsandboxed' >&2 || true
rm -rf "$dest"
mkdir -p "$dest"
chmod 755 "$dest"
dpkg-deb -x "$work"/landrun_*.deb "$dest/pkg"
dpkg-deb -x "$work"/libc6_*.deb "$dest/libc"
lib="$dest/libc/usr/lib/x86_64-linux-gnu"
cat > "$dest/landrun" <<WRAPPER
#!/bin/sh
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$dest/pkg/usr/bin/landrun" "\$@"
WRAPPER
chmod -R a+rX "$dest"
chmod 755 "$dest/landrun"
"$dest/landrun" --version >&2
echo "$dest/landrun"
