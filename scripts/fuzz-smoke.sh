#!/usr/bin/env bash
# A short coverage-guided fuzz of every cargo-fuzz target in fuzz/: each runs
# for FUZZ_SECONDS (default 20) from its committed corpus, with no sanitizer
# (safe Rust; the stable toolchain), optimised with debug assertions and
# overflow checks. Any crash, timeout or out-of-memory fails the script;
# libFuzzer leaves the input in fuzz/artifacts/TARGET/.
#
# Skips (exit 0) when `cargo fuzz` is not installed:
#   cargo install cargo-fuzz --locked
#
# Target dir: fuzz/target (cargo-fuzz's default), or "$CARGO_TARGET_DIR/fuzz"
# when CARGO_TARGET_DIR is set (a subfolder: the fuzz crate is its own
# workspace, with its own lock file and instrumented build).
# New inputs found go to a temporary folder: the committed corpus is only read.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "skip: cargo-fuzz is not installed (cargo install cargo-fuzz --locked): the fuzz smoke did not run"
  exit 0
fi

seconds="${FUZZ_SECONDS:-20}"
flags=(--sanitizer none --release --debug-assertions)
if [[ -n "${CARGO_TARGET_DIR:-}" ]]; then
  flags+=(--target-dir "$CARGO_TARGET_DIR/fuzz")
fi

echo "== cargo fuzz build"
cargo fuzz build "${flags[@]}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=()
for target in $(cargo fuzz list); do
  echo "== cargo fuzz run $target (${seconds}s)"
  mkdir -p "$scratch/$target"
  if ! cargo fuzz run "${flags[@]}" "$target" "$scratch/$target" "fuzz/corpus/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      2>"$scratch/$target.log"; then
    failed+=("$target")
    tail -n 60 "$scratch/$target.log"
  else
    grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs)' "$scratch/$target.log" | tail -n 2 || true
  fi
done

if ((${#failed[@]})); then
  echo "fuzz smoke: FAILED: ${failed[*]} (inputs in fuzz/artifacts/)"
  exit 1
fi
echo "fuzz smoke: every target ran ${seconds}s with no crash"
