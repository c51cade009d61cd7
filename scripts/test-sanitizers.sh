#!/usr/bin/env bash
# The unit and in-process tests under sanitizers: preset asan (AddressSanitizer and
# UndefinedBehaviorSanitizer, in build-asan) and tsan (ThreadSanitizer, in build-tsan), from
# CMakePresets.json. Configures each once, builds only the programs those tests run, runs them;
# under tsan, a few mpirun rows too.
#   test-sanitizers.sh [PRESET...]      default: asan tsan; extra ctest arguments in CTEST_ARGS
set -eu
cd "$(dirname "$0")/.."
labels='unit|inproc'  # the test presets' filter
[ $# -gt 0 ] || set -- asan tsan
for preset in "$@"; do
  dir=build-$preset
  [ -f "$dir/build.ninja" ] || cmake --preset "$preset"
  # An existing build re-runs CMake first if a CMakeLists changed, so that the test list
  # below includes a test added since (ninja's own rule for its build file).
  cmake --build "$dir" --target build.ninja
  # The programs those tests run, from CTest's own list: each test is named <label>.<target>
  # (tests/CMakeLists.txt), but for the cmake.* tests, which run CMake. Ninja refuses a name
  # that is not a target, and ctest fails a test whose program was not built as "Not Run": a
  # missing program never passes silently.
  targets=$(ctest --test-dir "$dir" -N -L "$labels" |
            sed -n 's/^ *Test *#[0-9]*: \(unit\|inproc\)[.]//p')
  [ -n "$targets" ] || { echo "test-sanitizers: no $labels tests in $dir" >&2; exit 1; }
  echo "test-sanitizers: $preset: building $(wc -w <<<"$targets") programs"
  # shellcheck disable=SC2086  # one word per target
  cmake --build "$dir" --parallel "$(nproc)" --target $targets
  # shellcheck disable=SC2086
  ctest --preset "$preset" -j "$(nproc)" ${CTEST_ARGS:-}
  if [ "$preset" = tsan ]; then
    # A few mpirun rows, where the runtime's own threads run: waiting trainers running
    # cycles, names raced by six threads, a lost rank. Open MPI allows it with one
    # suppression (tests/sanitizers/tsan.supp); any report fails the row.
    cmake --build "$dir" --parallel "$(nproc)" --target waiting_trainers faults
    TSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/tsan.supp halt_on_error=1" \
      ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" \
      -R '^(mpi[.]waiting_trainers[.]np2|faults[.](duplicate_name[.]np2|bad_reduce_op[.]np3|peer_stops[.]np3))$'
  fi
done
