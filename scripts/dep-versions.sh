#!/usr/bin/env bash
# hwsched's dependency ranges, checked at both ends (README, "Dependencies").
#
#   scripts/dep-versions.sh minimal   every direct dependency at the lowest
#                                     version its range allows (the floors
#                                     below), in a copy of the workspace
#                                     without compat-tests (which asks for the
#                                     newest tokio); runs the library's tests
#                                     with the I/O driver, hyper's traits,
#                                     serve and the tokio bridge
#   scripts/dep-versions.sh newest    `cargo update` in a copy of the
#                                     workspace, then builds every target and
#                                     runs compat-tests (hwsched beside the
#                                     newest tokio and hyper)
#
# cargo's -Z minimal-versions needs a nightly toolchain; the floors are
# therefore listed here, one `cargo update --precise` each (tokio, a
# dev-dependency, first: the newest tokio needs a newer mio; tokio-util,
# a dev-dependency and h2's (the `server` feature), before tokio: its
# newest needs a newer tokio; rustix, a
# dev-dependency's dependency, before libc: its newest needs a newer libc). Keep them equal
# to the lowest version of each range in Cargo.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
mode=${1:-minimal}

FLOORS=(
  "tokio-util 0.7.16"
  "tokio 1.48.0"
  "mio 1.1.0"
  "futures-io 0.3.31"
  "signal-hook-registry 1.4.0"
  "hyper 1.12.0"
  "tower-service 0.3.3"
  "crossbeam-deque 0.8.6"
  "crossbeam-utils 0.8.21"
  "hwlocality 1.0.0-alpha.13"
  "rustix 1.1.3"
  "libc 0.2.177"
  "parking_lot 0.12.5"
)

copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
# The tracked files only (no target/), so the copy builds from source.
git ls-files -z | xargs -0 -I{} cp --parents {} "$copy"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/dep-versions-$mode}

case "$mode" in
minimal)
  cd "$copy"
  sed -i 's/"compat-tests", //' Cargo.toml
  rm -rf compat-tests
  for f in "${FLOORS[@]}"; do
    set -- $f
    echo "floor: $1 $2"
    $CARGO update -q -p "$1" --precise "$2"
  done
  for f in "${FLOORS[@]}"; do
    set -- $f
    got=$($CARGO tree -q --features server,tokio-compat -e normal,dev -i "$1" --depth 0 2>/dev/null | head -n 1 | awk '{print $2}')
    [ "$got" = "v$2" ] || { echo "$1 resolved to $got, not the floor v$2" >&2; exit 1; }
  done
  $CARGO test -q --features server,tokio-compat --lib
  ;;
newest)
  cd "$copy"
  $CARGO update -q
  $CARGO build -q --workspace --all-targets --features server,tokio-compat
  $CARGO test -q -p hwsched-compat-tests
  ;;
*)
  echo "usage: $0 minimal|newest" >&2
  exit 2
  ;;
esac
