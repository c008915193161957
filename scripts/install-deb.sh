#!/usr/bin/env bash
# Installs one of Debian's packages when its program is missing: as root through apt-get (refreshing
# the package lists once if the first try fails), else it says how. Exits 1 when the program stays missing.
#
#   scripts/install-deb.sh PACKAGE PROGRAM "WHAT NEEDS IT"   (PROGRAM: a name looked up on PATH, or a path)
set -uo pipefail
package=$1 program=$2 needed_by=$3
command -v "$program" >/dev/null && exit 0  # a name on PATH, or a path
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  if apt-get install -y -q "$package" || { apt-get update -q && apt-get install -y -q "$package"; }; then
    exit 0
  fi
fi
echo "$package is missing: install it as root (apt-get install -y $package) for $needed_by" >&2
exit 1
