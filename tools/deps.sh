# tools/deps.sh — sourced by tools/demo, tools/test, tools/test-sanitized, tools/fuzz and tools/bench:
# installs the Debian 12 packages shardsim needs (the Python module: pybind11-dev, python3-dev; its
# Optuna example and test: python3-optuna, python3-cmaes) (only the missing ones; `apt-get update` once) and
# builds into ./build. FUZZ_DEPS (clang-14, its libFuzzer/sanitizer runtime — only *recommended* by
# clang-14 — and llvm-symbolizer) are installed by `shardsim_install_deps fuzz` (tools/test, tools/fuzz).
DEPS="cmake g++ make pkg-config libsimgrid-dev libtbb-dev nlohmann-json3-dev doctest-dev libboost-graph-dev libcli11-dev libeigen3-dev gnuplot-nox pybind11-dev python3-dev python3-optuna python3-cmaes python3-yaml libopenmpi-dev openmpi-bin"
FUZZ_DEPS="clang-14 libclang-rt-14-dev llvm-14"

shardsim_install_deps() {
  local missing="" wanted="$DEPS"
  [ "${1:-}" = fuzz ] && wanted="$DEPS $FUZZ_DEPS"
  for p in $wanted; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    echo "installing:$missing" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >&2
  fi
}

shardsim_build() {
  local root; root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$root/build" -j "$(nproc)" -- --no-print-directory >&2
}
