#!/usr/bin/env bash
# install.demo_needs_only_its_packages: `scripts/demo` must configure and build on a machine that
# has only the demo's Debian packages (scripts/packages.sh). Two checks:
#   1. every CMake package the project looks for (find_package in a CMakeLists.txt or cmake/*.cmake)
#      is one the demo's packages bring (Eigen3, xsimd, Boost, Threads) or is listed in
#      FUSEDSL_CMAKE_PACKAGES_NOT_IN_DEMO, so a new dependency cannot slip past check 2;
#   2. `scripts/demo --build-only` with each listed package disabled
#      (-DCMAKE_DISABLE_FIND_PACKAGE_<name>=ON) configures and builds the demo's programs.
#   demo_check.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src="$1"; work="$2"
# shellcheck source=../../scripts/packages.sh
source "$src/scripts/packages.sh"

demo_own=(Eigen3 xsimd Boost Threads fusedsl)
mapfile -t found < <(cd "$src" && grep -rhoE 'find_package\([A-Za-z0-9_]+' \
                       --include=CMakeLists.txt --include='*.cmake' --include='*.cmake.in' \
                       CMakeLists.txt cmake benchmarks examples tests tools |
                     sed 's/find_package(//' | sort -u)
missing=()
for name in "${found[@]}"; do
  listed=false
  for known in "${demo_own[@]}" "${FUSEDSL_CMAKE_PACKAGES_NOT_IN_DEMO[@]}"; do
    [ "$name" = "$known" ] && listed=true
  done
  $listed || missing+=("$name")
done
if ((${#missing[@]})); then
  echo "demo_check: find_package(${missing[*]}) is neither the demo's nor listed in" \
       "FUSEDSL_CMAKE_PACKAGES_NOT_IN_DEMO (scripts/packages.sh)" >&2
  exit 1
fi
echo "demo_check: ${#found[@]} CMake packages looked for; the demo goes without:" \
     "${FUSEDSL_CMAKE_PACKAGES_NOT_IN_DEMO[*]}"

disable=()
for name in "${FUSEDSL_CMAKE_PACKAGES_NOT_IN_DEMO[@]}"; do
  disable+=("-DCMAKE_DISABLE_FIND_PACKAGE_${name}=ON")
done
rm -rf "$work"
"$src/scripts/demo" --build-only --build-dir="$work" "${disable[@]}"
for program in examples/transformer_demo tools/fusedsl-tpu; do
  [ -x "$work/$program" ] || { echo "demo_check: $work/$program was not built" >&2; exit 1; }
done
if grep -q '^FUSEDSL_BUILD_TESTS:BOOL=ON' "$work/CMakeCache.txt"; then
  echo "demo_check: the demo preset configures the tests" >&2
  exit 1
fi
echo "demo_check: the demo configured and built without them"
