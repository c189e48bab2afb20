# The Debian 12 packages the scripts install, one list per purpose, and the function that installs
# what is missing. Sourced by scripts/demo, scripts/test, scripts/bench and scripts/bench-embed.
#
#   demo   what `scripts/demo` configures and builds (the `demo` preset: no tests, benchmarks or
#          CUDA): the compiler, CMake, ccache and the three header libraries fusedsl itself needs.
#   build  what configuring the `ci` preset needs (tests, benchmarks, tools): doctest and Google
#          Benchmark; nlohmann-json for the safetensors reader and the tokenizers (text/), utf8proc
#          for the tokenizers.
#   test   what the whole suite runs with: python3-venv for the interop tests' jax venv and the
#          model venv; clang and its runtime for the fuzzers; GNU time for the compile-time tests;
#          the AArch64 cross compiler and qemu-user for the NEON kernel tests (tests/aarch64).
#   bench  the benchmarks' extras: python3-venv for the peers' venv, util-linux for taskset.
# The presets use Makefiles, so no ninja-build.
# shellcheck shell=bash
FUSEDSL_PACKAGES_DEMO=(build-essential cmake ccache libeigen3-dev libxsimd-dev libboost-dev)
FUSEDSL_PACKAGES_BUILD=("${FUSEDSL_PACKAGES_DEMO[@]}" doctest-dev libbenchmark-dev
                        nlohmann-json3-dev libutf8proc-dev)
FUSEDSL_PACKAGES_TEST=("${FUSEDSL_PACKAGES_BUILD[@]}" python3-venv clang libclang-rt-14-dev time
                       g++-aarch64-linux-gnu qemu-user)
FUSEDSL_PACKAGES_BENCH=("${FUSEDSL_PACKAGES_BUILD[@]}" python3-venv util-linux)

# The CMake packages (find_package names) the `demo` preset must configure and build without:
# every one the project looks for that the demo's Debian packages do not bring. A test
# (demo.packages, tests/demo) configures the demo with each of them disabled and builds it.
FUSEDSL_CMAKE_PACKAGES_NOT_IN_DEMO=(nlohmann_json utf8proc doctest benchmark Python3 OpenMP
                                    CUDAToolkit)

# fusedsl_install_packages WHO PACKAGE...: apt-get install those of PACKAGE... that dpkg does not
# list as installed (as root, or through sudo); WHO names the script in its messages. Returns 1
# with a message when they cannot be installed.
fusedsl_install_packages() {
  local who="$1"; shift
  local missing=() p
  command -v dpkg >/dev/null 2>&1 || return 0   # not Debian: the user installs them
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "$who: installing missing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "$who: not root and no sudo; install them by hand: apt-get install ${missing[*]}" >&2
      return 1
    fi
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      "${missing[@]}"
}
