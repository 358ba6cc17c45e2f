#!/usr/bin/env bash
# The Containerfile's runtime image, checked without a registry:
#  1. its shape: multi-stage, Debian slim runtime, non-root USER, the gpufleet entrypoint;
#  2. its runtime package list is exact: every library the binary needs (ELF NEEDED entries,
#     mapped to Debian packages with dpkg -S) is installed by it or by the slim base, and it
#     installs nothing the binary does not need (ca-certificates aside);
#  3. the runtime file system staged from that list (the binary, the libraries it resolves,
#     the loader) runs as uid 65532 in a chroot: `gpufleet version`, `gpufleet agent --help`.
# The real build (buildah, daemonless) needs the base image from a registry; where none is
# reachable the script says so and what it tried, and the checks above stand in for it.
# GPUFLEET_IMAGE_BUILD=1 runs the full build when a registry is reachable.
# Usage: image.sh REPO_ROOT GPUFLEET_BIN
set -euo pipefail
repo="$1"
bin="$2"
file="$repo/Containerfile"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "image: FAIL: $*" >&2; exit 1; }

# 1. Shape.
froms=$(grep -c '^FROM ' "$file")
(( froms >= 2 )) || fail "Containerfile has $froms FROM lines; it must be multi-stage"
base="$(sed -n 's/^ARG DEBIAN_IMAGE=//p' "$file")"
[[ "$base" == *debian:*-slim ]] || fail "runtime base '$base' is not a Debian slim image"
[[ "$(grep '^FROM ' "$file" | tail -1)" == 'FROM ${DEBIAN_IMAGE}' ]] || fail "the final stage is not the Debian slim base"
user="$(grep '^USER ' "$file" | tail -1 | awk '{print $2}')"
[[ "$user" =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || fail "final USER '$user' is not a numeric non-root uid:gid"
grep -q '^ENTRYPOINT \["/usr/bin/gpufleet"\]' "$file" || fail "ENTRYPOINT is not /usr/bin/gpufleet"
grep -qE '^ADD .*https?://' "$file" && fail "ADD from a URL: fetch nothing unpinned at build time"

# 2. The runtime package list (the apt-get install of the last stage).
last_stage="$(awk '/^FROM /{n++} n=='"$froms"'' "$file")"
listed="$(tr '\\\n' '  ' <<<"$last_stage" | sed -n 's/.*--no-install-recommends\(.*\)&& rm -rf.*/\1/p' | tr ' ' '\n' | grep -v '^$' | sort -u)"
[[ -n "$listed" ]] || fail "cannot find the runtime apt-get install list in the last stage"
# In debian:bookworm-slim already (Essential or required by apt/dpkg).
base_pkgs="libc6 libgcc-s1 libstdc++6 zlib1g"
pkg_of() {  # a shared library path -> its Debian package (merged-/usr aware)
  local p="$1" q
  for q in "$p" "$(readlink -f "$p")" "${p#/usr}" "/usr$p" "$(readlink -f "$p" | sed 's|^/usr||')"; do
    dpkg -S "$q" 2>/dev/null | head -1 | cut -d: -f1 && return 0
  done
  return 1
}
needed=""
for lib in $(readelf -d "$bin" | awk '/NEEDED/{gsub(/[][]/,"",$5); print $5}'); do
  case "$lib" in libasan.so*|libubsan.so*|libtsan.so*) continue ;; esac  # sanitizer build runtimes
  path="$(ldd "$bin" | awk -v l="$lib" '$1==l{print $3}')"
  [[ -n "$path" ]] || fail "ldd cannot resolve $lib"
  pkg="$(pkg_of "$path")" || fail "no Debian package owns $path ($lib)"
  needed+="$pkg"$'\n'
done
needed="$(sort -u <<<"$needed" | grep -v '^$')"
for p in $needed; do
  grep -qx "$p" <<<"$listed" || [[ " $base_pkgs " == *" $p "* ]] \
    || fail "the binary needs $p but the runtime stage does not install it"
done
for p in $listed; do
  [[ "$p" == ca-certificates ]] && continue
  grep -qx "$p" <<<"$needed" || fail "the runtime stage installs $p, which the binary does not need"
done
echo "image: runtime packages exact: $(tr '\n' ' ' <<<"$listed")"

# 3. Stage the runtime file system and run it as the image's user.
if [[ $(id -u) -ne 0 ]]; then
  echo "image: not root, chroot run skipped"
else
  stage="$work/rootfs"
  install -D -m 0755 "$bin" "$stage/usr/bin/gpufleet"
  for p in $(ldd "$bin" | awk '$3 ~ /^\//{print $3} $1 ~ /^\//{print $1}'); do
    install -D "$(readlink -f "$p")" "$stage$p"
  done
  mkdir -p "$stage/tmp" && chmod 1777 "$stage/tmp"
  # /proc, as a container runtime provides it (sanitizer builds read it at exit).
  mkdir -p "$stage/proc"
  mount -t proc proc "$stage/proc" || fail "cannot mount /proc in the staged file system"
  trap 'umount "$stage/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
  out="$(chroot --userspec="$user" "$stage" /usr/bin/gpufleet version 2>&1)" || fail "staged image does not run as $user: $out"
  [[ "$out" == "gpufleet "* ]] || fail "gpufleet version printed '$out'"
  chroot --userspec="$user" "$stage" /usr/bin/gpufleet agent --help >/dev/null 2>&1 || fail "gpufleet agent --help fails in the staged image"
  echo "image: staged runtime file system ($(find "$stage" -path "$stage/proc" -prune -o -type f -print | wc -l) files) runs as $user: $out"
fi

# The real build, where possible.
if command -v buildah >/dev/null 2>&1; then
  if out="$(timeout 60 buildah pull --quiet "$base" 2>&1)"; then
    if [[ "${GPUFLEET_IMAGE_BUILD:-0}" == 1 ]]; then
      buildah build --isolation chroot -f "$file" -t gpufleet:test "$repo" || fail "buildah build failed"
      [[ "$(buildah inspect --format '{{.OCIv1.Config.User}}' gpufleet:test)" == "$user" ]] || fail "built image user is not $user"
      echo "image: built with buildah"
    else
      echo "image: base image pulled; set GPUFLEET_IMAGE_BUILD=1 for the full build"
    fi
  else
    echo "image: buildah cannot build here: pulling the base image $base failed: $(tail -1 <<<"$out")"
  fi
else
  echo "image: buildah not installed; the checks above stand in for a build"
fi
echo "image: PASS"
