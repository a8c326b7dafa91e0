#!/usr/bin/env bash
# Install the Debian packages the one-machine cluster needs (root, non-interactive). Installs only what
# is missing; services are not started by the packages (a policy-rc.d denies it while apt runs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PACKAGES=(etcd-server containerd runc containernetworking-plugins iptables conntrack mmdebstrap
          openssl iproute2 procps util-linux curl ca-certificates gcc libc6-dev
          python3-pip)  # build_images.py runs "$PYTHON -m pip download"

[ "$(id -u)" = 0 ] || die "deps.sh must run as root (it installs Debian packages)"
command -v apt-get >/dev/null || die "apt-get not found: the one-machine cluster needs Debian 12 or Ubuntu"

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || { log "Debian packages: all present"; exit 0; }

log "installing Debian packages: ${missing[*]}"
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
apt-get update -qq >&2 || die "apt-get update failed"
apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}" >&2 \
    || die "apt-get install ${missing[*]} failed"
log "Debian packages installed in $(( $(date +%s) - start ))s"
