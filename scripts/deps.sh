#!/bin/sh
# Installs the Debian 12 packages codeshim builds, tests and runs with, and
# only those missing (a no-op on a ready machine). Used by `make demo`,
# `make test` and .ci/run, so a fresh machine needs nothing else.
set -eu
PKGS="gcc make libc6-dev libcurl4-openssl-dev libcjson-dev libcmocka-dev
curl python3 python3-pycurl python3-jsonschema python3-pytest nettle-dev libyaml-dev
clang libclang-rt-14-dev libssl-dev openssl
bubblewrap libseccomp-dev util-linux passwd procps binutils
python3-numpy python3-pandas python3-matplotlib
php-cli php-curl python3-tornado"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "codeshim: installing Debian packages:$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
