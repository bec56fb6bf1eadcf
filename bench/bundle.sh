#!/usr/bin/env bash
# Packs what a device call needs from this build into one small folder that travels in `carry`
# (binaries stripped and xz-compressed: a 64 MiB limit holds the tool, the plugins and a test
# binary or two), with unpack.sh, which a run script on the device sources from the checkout's
# root: it restores build/bin and build/plugins and exports the environment the tests and
# `moe bench` read.
#
#   bench/bundle.sh build/g01 moe moe_trtllm_gpu_tests      # tool and tests, every plugin
#   bench/bundle.sh --fixtures build/g01 moe moe_ep_tests   # and build/test_plugins (the
#                                                           # fixture plugins such tests load)
#   bench/bundle.sh --alt old=build/alt_old build/g01 moe   # and another build's plugins (the
#                                                           # libmoe_*.so of a folder), restored
#                                                           # as build/alt/old for bench/ab.py's
#                                                           # --plugins old=build/alt/old
#   # on the device, in the run script:  source build/g01/unpack.sh
#
# The folder must be ignored by git (build/ is). Plugins: every libmoe_*.so of build/plugins; the
# plugin scanner comes along where it was built.
set -euo pipefail
cd "$(dirname "$0")/.."
fixtures=0
alts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fixtures) fixtures=1; shift ;;
    --alt)
      [[ "${2:-}" =~ ^[A-Za-z0-9_.-]+=.+$ ]] || { echo "bench/bundle.sh: --alt NAME=DIR" >&2; exit 2; }
      alts+=("$2"); shift 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: bench/bundle.sh [--fixtures] [--alt NAME=DIR]... <folder under build/> <binary of build/bin>..." >&2
  exit 2
fi
out=$1
shift
case "$out" in
  build/*) ;;
  *) echo "bench/bundle.sh: $out is not under build/ (it must be ignored by git)" >&2; exit 2 ;;
esac
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pack() {  # source, name in the bundle
  [ -f "$1" ] || { echo "bench/bundle.sh: $1 was not built" >&2; exit 1; }
  strip -o "$tmp/x" "$1"
  xz -T0 -6 -c "$tmp/x" > "$out/$2.xz"
}
bins=()
names=("$@")
# The registry probes plugins through the scanner where it was built: it always travels.
if [ -f build/bin/moe-plugin-scanner ] && [[ " ${names[*]} " != *" moe-plugin-scanner "* ]]; then
  names+=(moe-plugin-scanner)
fi
for b in "${names[@]}"; do
  pack "build/bin/$b" "$b"
  bins+=("$b")
done
libs=()
for so in build/plugins/libmoe_*.so; do
  pack "$so" "$(basename "$so")"
  libs+=("$(basename "$so")")
done
alt_names=()
rm -rf "$out/alt"
for a in "${alts[@]}"; do
  name=${a%%=*} dir=${a#*=}
  ls "$dir"/libmoe_*.so > /dev/null 2>&1 || { echo "bench/bundle.sh: $dir holds no libmoe_*.so" >&2; exit 1; }
  mkdir -p "$out/alt/$name"
  for so in "$dir"/libmoe_*.so; do
    strip -o "$tmp/x" "$so"
    xz -T0 -6 -c "$tmp/x" > "$out/alt/$name/$(basename "$so").xz"
  done
  alt_names+=("$name")
done
if [ $fixtures = 1 ]; then
  [ -d build/test_plugins ] || { echo "bench/bundle.sh: build/test_plugins was not built" >&2; exit 1; }
  tar -C build -cJf "$out/test_plugins.tar.xz" test_plugins
else
  rm -f "$out/test_plugins.tar.xz"
fi
cat > "$out/unpack.sh" <<EOF
# Sourced by a device run script from the checkout's root (written by bench/bundle.sh).
_bundle=\$(dirname "\${BASH_SOURCE[0]}")
mkdir -p build/bin build/plugins
for b in ${bins[*]}; do xz -dc "\$_bundle/\$b.xz" > "build/bin/\$b"; chmod +x "build/bin/\$b"; done
for l in ${libs[*]}; do xz -dc "\$_bundle/\$l.xz" > "build/plugins/\$l"; done
[ -f "\$_bundle/test_plugins.tar.xz" ] && tar -C build -xJf "\$_bundle/test_plugins.tar.xz"
for a in ${alt_names[*]}; do
  mkdir -p "build/alt/\$a"
  for l in "\$_bundle/alt/\$a"/*.xz; do xz -dc "\$l" > "build/alt/\$a/\$(basename "\$l" .xz)"; done
done
export XDG_CACHE_HOME=/tmp/moe-cache MOE_TEST_SOURCE_DIR=\$PWD MOE_TEST_BUILD_DIR=\$PWD/build
export MOE_PLUGIN_PATH=\$PWD/build/plugins MOE_LOG_LEVEL=error
EOF
du -sh "$out" | cut -f1 | xargs echo "bench/bundle.sh: $out holds ${#bins[@]} binaries, ${#libs[@]} plugins and ${#alt_names[@]} other builds' plugins:"
