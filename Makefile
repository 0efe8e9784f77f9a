# hwsched: set-up and the two commands of the README's Quick start.
#
#   make demo   installs the system packages if needed, runs the hackbench example
#   make test   installs the system packages if needed, runs every test (loom included)

CARGO ?= cargo
PKGS := libhwloc-dev libudev-dev pkg-config
# Preemption bound for the loom models (see README, "Model checking").
LOOM_MAX_PREEMPTIONS ?= 3

.PHONY: deps dep-versions demo test test-unit test-loom bench fmt clippy check-imports ci

deps:
	@if pkg-config --exists hwloc 2>/dev/null; then \
		echo "hwloc $$(pkg-config --modversion hwloc) found by pkg-config"; \
	elif [ "$$(id -u)" = "0" ]; then \
		echo "installing $(PKGS) with apt-get"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PKGS); \
	else \
		echo "hwloc is missing. Run as root:"; \
		echo "  sudo apt-get update && sudo apt-get install -y $(PKGS)"; \
		exit 1; \
	fi

demo: deps
	$(CARGO) run --release --example hackbench

test: deps test-unit test-loom

test-unit:
	# The trace tool apart: its tests build hwsched with the `trace`
	# feature, which would otherwise be unified into every test's build.
	$(CARGO) test --workspace --exclude hwsched-trace
	$(CARGO) test -p hwsched-trace
	# The I/O driver (the `io` feature, and `hyper` for hyper's traits): its
	# own tests, and the guarantees' suites again with every worker sleeping
	# through the driver (the suites create it first: tests/common,
	# `drive_reactor`).
	$(CARGO) test --features hyper --lib
	$(CARGO) test --features hyper --test io --test io_emfile --test net_udp_unix --test signal \
		--test long_poll --test time_socket_edges --test reliability --test conservation --test edges \
		--test interval
	# hwsched::hyper::serve (the `server` feature), tokio's I/O traits on
	# hwsched::net (the `tokio` feature) and the tokio bridge
	# (`tokio-compat`).
	$(CARGO) test --features server --test hyper_serve
	$(CARGO) test --features hyper,tokio --test tokio_io
	$(CARGO) test --features hyper,tokio-compat --test tokio_compat
	$(CARGO) test --features hyper --doc
	# The scheduler's trace (the `trace` feature), with and without the I/O
	# driver, and its doc examples.
	$(CARGO) test --features trace --test trace --lib
	$(CARGO) test --features trace,io --test trace
	$(CARGO) test --features trace --doc

# Each model in its own process (scripts/loom.sh), so that one failing model
# does not hide the others; optimized (--release) for speed, with debug
# assertions kept on (-C debug-assertions, set by the script): hwsched's
# debug_assert!s on the idle counts and registry slots run in every
# execution, and loom-tests refuses to build without them.
test-loom:
	CARGO="$(CARGO)" LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) \
		LOOM_TARGET_DIR=target/loom scripts/loom.sh

bench: deps
	$(CARGO) bench

fmt:
	$(CARGO) fmt --all -- --check

clippy: deps
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The dependency ranges at both ends: every direct dependency at its
# floor, then everything at its newest with compat-tests (hwsched beside
# the newest tokio and hyper).
dep-versions: deps
	CARGO="$(CARGO)" scripts/dep-versions.sh minimal
	CARGO="$(CARGO)" scripts/dep-versions.sh newest

# No import cycle between the modules of src/, file by file and folder by
# folder (README, "Layout").
check-imports:
	$(CARGO) test --test import_cycles

ci: fmt clippy check-imports test
