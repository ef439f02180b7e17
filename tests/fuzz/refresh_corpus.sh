#!/usr/bin/env bash
# Rebuilds the checked-in corpora tests/fuzz/corpus/<fuzzer> from the seed maker's inputs, the
# current corpus and any scratch corpora of longer runs, merged by libFuzzer (-merge=1: the
# smallest set keeping all coverage). Inputs that fail on the library as it is are left out
# (they belong in tests/fuzz/regressions once reported).
#
#   tests/fuzz/refresh_corpus.sh <build dir with the fuzzers> [scratch corpus dir per fuzzer...]
#
# e.g. tests/fuzz/refresh_corpus.sh build-asan build-asan/fuzz-corpus
# (a scratch dir is looked up as <dir>/<fuzzer> when that exists).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$1"
shift
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for fuzzer in max_pool_fuzzer max_unpool_fuzzer; do
  bin="$build/tests/fuzz/$fuzzer"
  mkdir -p "$work/$fuzzer/seeds" "$work/$fuzzer/merged"
  # The seed maker skips nothing itself: open bugs are steered around by POOLGEN_FUZZ_AVOID.
  POOLGEN_FUZZ_AVOID="${POOLGEN_FUZZ_AVOID:-big_window,empty_huge,grad_shape}" \
    "$bin" -make_seeds="$work/$fuzzer/seeds"
  sources=("$work/$fuzzer/seeds" "$here/corpus/$fuzzer")
  for scratch in "$@"; do
    [ -d "$scratch/$fuzzer" ] && scratch="$scratch/$fuzzer"
    sources+=("$scratch")
  done
  # Without POOLGEN_FUZZ_AVOID: a crashing input is dropped by the merge.
  # Edges only (no hit counts): a compact corpus.
  "$bin" -merge=1 -use_counters=0 -timeout=20 "$work/$fuzzer/merged" "${sources[@]}" 2>"$work/$fuzzer/merge.log" ||
    true
  kept=0
  for input in "$work/$fuzzer/merged"/*; do
    if "$bin" "$input" >/dev/null 2>&1; then
      kept=$((kept + 1))
    else
      echo "refresh_corpus: $fuzzer fails on $(basename "$input"): left out" >&2
      rm -f "$input"
    fi
  done
  rm -rf "$here/corpus/$fuzzer"
  mkdir -p "$here/corpus/$fuzzer"
  cp "$work/$fuzzer/merged"/* "$here/corpus/$fuzzer/"
  echo "refresh_corpus: $fuzzer: $kept inputs, $(du -cb "$here/corpus/$fuzzer"/* | tail -1 | cut -f1) bytes"
done
