# User-facing entry point. `make demo` and `make check` are all a new user types.
#
#   make               build release components into build/mca/ (mca_<fw>_<name>.so + help files)
#   make install       copy them into Open MPI's component directory (or MCA_DIR=...)
#   make deb           a .deb of them for the Debian-packaged Open MPI they are built for
#   make check         install build dependencies if missing, then the tests of Open MPI
#                      4.1.4 (Debian's) in the matrix `.ci/run` runs (README, "What runs where")
#   make check-all     the whole matrix: every series and build, every rank count
#   make demo          set up and build if needed, then each of ours beside its stock
#                      counterpart: 2-rank latency and bandwidth, one short table (< 1 min)
#   make count-instructions   rsmcuda's instructions per small send and idle progress
#                      pass under callgrind beside vader and sm; fails if above them
#   make bench         the full benchmark: every configuration, interleaved rounds,
#                      medians, ratios, CSV/JSON/PNG under build/bench/ (minutes),
#                      NetPIPE per pair, ratios flagged against docs/bench/summary.csv
#                      BENCH_ARGS="--configs stock-tcp,rusnic --rounds 5 -- --test latency"
#   OMPI_PREFIX=/opt/ompi make   build against another Open MPI 4.1.x installation
#   make static-ompi   Debian's openmpi 4.1.4 source package built with our components
#                      compiled in (static), installed in build/ompi-static/prefix;
#                      cached, not part of `make check` (the first build takes ~1 h
#                      on 2 cores)
#   make check-static  static-ompi if needed, then tests/static_build.rs on it
#   make validate      MPICH's test suite, LAMMPS and GROMACS under each of ours and its
#                      stock counterpart on Open MPI 4.1.4 and 5.0.7, one table (fetches
#                      and builds what it needs; hours here); VALIDATE_SERIES=4.1 or 5.0
#                      for one series, VALIDATE_ARGS="--suites pt2pt,coll ..." for less
#   make validate-ci   its CI subset: MPICH pt2pt (1-2 ranks; each component on one
#                      series, pairwise), LAMMPS
#   make ompi5         Open MPI 5.0.7 (Debian 13's source) built into ~/.cache/rmca
#   make -s ompi5-prefix   its install prefix (built first if needed), nothing else
#   make static-ompi5  5.0.7 with ours compiled in (static), cached beside it
#   make libfabric2    libfabric 2.1 (Debian 13's source) built into ~/.cache/rmca
#   make -s libfabric2-prefix   its install prefix (built first if needed), nothing else
#   make check-libfabric2   rofi and rusnic on it under Open MPI 4.1.4 and 5.0 (tests/libfabric2.rs)
#   make bench-libfabric2   rofi on it beside 1.17, the stock ofi MTL and vader
#   make check-ompi5   ours built against it (build/ompi5/mca), then tests/ompi5*.rs
#                      but the static build's
#   make check-static-ompi5   static-ompi5 if needed, then tests/ompi5_static.rs on it

SHELL := /bin/bash
CARGO ?= cargo
BUILD := build
MCA_BUILD := $(BUILD)/mca
PROFILE_DIR := target/release
# Cargo profile of the test binaries (Cargo.toml: release without LTO).
TEST_PROFILE := test-light

# Each .so is written beside its final name (a name of this shell's own, so two builds at
# once do not share it) and renamed into place: a job already running keeps the file it
# mapped instead of seeing its code change under it.
# crate:framework:name for every component (test fixtures included: tests load them).
COMPONENTS := btl-rfixture:btl:rfixture mtl-rfixture:mtl:rfixture btl-rusnic:btl:rusnic btl-rsmcuda:btl:rsmcuda mtl-rofi:mtl:rofi

HELP_FILES := $(wildcard configure-support/help/help-*.txt)

.PHONY: all components count-instructions cuda-standin cuda-standin-dir install deb check check-all test lint setup demo bench bench-tool clean static-ompi check-static check-fresh-demo ompi5 ompi5-prefix components-ompi5 static-ompi5 check-ompi5 check-static-ompi5 libfabric2 libfabric2-prefix components-libfabric2 components-libfabric2-ompi5 check-libfabric2 bench-libfabric2 ompi-cuda ompi-cuda-prefix components-ompi-cuda check-cuda gpu-bundle check-debian13 validate-debian13

all: components

setup:
	@configure-support/setup

# $(call place_components,COMPONENTS,PROFILE_DIR,OUT_DIR,HELP_FILES): each built
# libmca_<fw>_<name>.so as OUT_DIR/mca_<fw>_<name>.so (beside it, then renamed), and the
# help files.
define place_components
	@mkdir -p $(3)
	@for c in $(1); do \
	    IFS=: read -r crate fw name <<< "$$c"; \
	    tmp=$(3)/.mca_$${fw}_$${name}.so.new.$$$$; \
	    install -m 0755 $(2)/libmca_$${fw}_$${name}.so $$tmp; \
	    mv -f $$tmp $(3)/mca_$${fw}_$${name}.so; \
	    echo "  built $(3)/mca_$${fw}_$${name}.so"; \
	done
	@install -m 0644 $(4) $(3)/
endef

components:
	$(CARGO) build --release $(foreach c,$(COMPONENTS),-p $(word 1,$(subst :, ,$(c))))
	$(call place_components,$(COMPONENTS),$(PROFILE_DIR),$(MCA_BUILD),$(HELP_FILES))

# Test fixture, never installed: the CUDA driver stand-in (tools/cuda-standin) as
# build/cuda-standin/libcuda.so.1 (+ libcuda.so for -lcuda). Only tests that prepend
# this directory to LD_LIBRARY_PATH (and set RMCA_CUDA_STANDIN=1) load it.
CUDA_STANDIN_DIR := $(BUILD)/cuda-standin

cuda-standin:
	$(CARGO) build --release -p cuda-standin
	@mkdir -p $(CUDA_STANDIN_DIR)
	@install -m 0755 $(PROFILE_DIR)/libcuda_standin.so $(CUDA_STANDIN_DIR)/.libcuda.so.1.new
	@mv -f $(CUDA_STANDIN_DIR)/.libcuda.so.1.new $(CUDA_STANDIN_DIR)/libcuda.so.1
	@ln -sfn libcuda.so.1 $(CUDA_STANDIN_DIR)/libcuda.so
	@echo "  built $(CUDA_STANDIN_DIR)/libcuda.so.1 (test stand-in, not a driver)"

cuda-standin-dir:
	@echo $(abspath $(CUDA_STANDIN_DIR))

install: components
	@configure-support/install-components $(MCA_BUILD) "$(MCA_DIR)"

# A Debian package of ours for the Debian-packaged Open MPI they are built against
# (configure-support/make-deb; DEBFULLNAME and DEBEMAIL name the maintainer, else git's
# identity), into build/deb/.
deb: components
	@configure-support/make-deb $(MCA_BUILD) $(BUILD)/deb

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

# Under no-residue: the run fails if it leaves anything in /dev/shm or in the nftables
# ruleset that was not there before it.
test: components
	tools/residue/no-residue $(CARGO) test --workspace --profile $(TEST_PROFILE) -- --test-threads=2

check: setup lint test

# The whole test matrix (README, "What runs where"): the rank counts and configurations
# that `make check` and `.ci/run` leave to it (RMCA_MATRIX=full), on every series and
# build the project has, the static builds included. What to run before resolving an
# issue that touches a series: about 1 h 30 min here with warm caches, and the first
# time another hour for the static 4.1.4 build.
check-all:
	RMCA_MATRIX=full $(MAKE) --no-print-directory check check-ompi5 check-static-ompi5 check-cuda check-libfabric2 check-static check-debian13

bench-tool:
	$(CARGO) build --release -p rmca-bench

# The same set-up as `make check` first: on a fresh machine the build needs Open MPI's
# mpicc and headers (the setup script installs only what is missing).
demo:
	@configure-support/setup
	@$(MAKE) --no-print-directory components bench-tool
	$(PROFILE_DIR)/rmca-bench --demo $(BENCH_ARGS)

# make demo on this machine as if Open MPI were not installed (an overlay of / in a
# private mount namespace; nothing here changes). ~10 min: a clean clone and build.
check-fresh-demo:
	tests/fresh-machine/demo-without-openmpi

bench: components bench-tool
	$(PROFILE_DIR)/rmca-bench $(BENCH_ARGS)

# rsmcuda's instructions per 8-byte MPI_Isend and per idle MPI_Test on the sending rank
# (callgrind: the same count on any load), beside vader (4.1) and sm (5.0); fails if
# rsmcuda counts more than the stock BTL (tests/bench/count-instructions --check).
# COUNT_ARGS="--series 4.1 --n 20000".
count-instructions: components components-ompi5
	RMCA_OMPI5_PREFIX=$$(configure-support/ompi5 --print-prefix) \
	    tests/bench/count-instructions --check --n 5000 $(COUNT_ARGS)

# Open MPI 5.0.x from Debian 13's source, built once into a cache outside the checkout
# (~/.cache/rmca/ompi-<version>-<options hash>; ~9 min on 2 cores the first time).
ompi5:
	@configure-support/ompi5

ompi5-prefix:
	@configure-support/ompi5 --print-prefix

# Ours built against that Open MPI 5 (its own target directory: the bindings differ)
# into build/ompi5/mca; then the tests of tests/ompi5.rs on it.
OMPI5_COMPONENTS := $(filter-out %rfixture,$(COMPONENTS))
components-ompi5:
	@prefix=$$(configure-support/ompi5 --print-prefix) && \
	OMPI_PREFIX=$$prefix CARGO_TARGET_DIR=target/ompi5 \
	    $(CARGO) build --release $(foreach c,$(OMPI5_COMPONENTS),-p $(word 1,$(subst :, ,$(c))))
	$(call place_components,$(OMPI5_COMPONENTS),target/ompi5/release,$(BUILD)/ompi5/mca,$(filter-out %rfixture.txt,$(HELP_FILES)))

# Open MPI 5.0.7 again, with ours compiled in (static), cached beside it: see
# configure-support/static-ompi5.
static-ompi5:
	@configure-support/static-ompi5

# tests/ompi5.rs (conformance, ompi_info, cross-series refusal), tests/ompi5_realism.rs
# (loss, two hosts, kill -9, accelerator), tests/ompi5_mpi4py.rs (mpi4py built against
# 5.0 in its own venv) and tests/ompi5_sessions.rs (MPI_Comm_create_from_group: ob1's
# extended CIDs); then tests/dynamic.rs' 5.0 module (spawn, spawn_multiple,
# grandchildren, a child's abort) and the 5.0 half of tests/rofi_spawn_choice.rs (a
# spawned job chooses rofi's provider as its parent did).
check-ompi5: components components-ompi5
	RMCA_OMPI5_PREFIX=$$(configure-support/ompi5 --print-prefix) RMCA_REQUIRE_OMPI5=1 \
	    tools/residue/no-residue $(CARGO) test --profile $(TEST_PROFILE) --test ompi5 --test ompi5_realism \
	        --test ompi5_mpi4py --test ompi5_sessions -- --test-threads=2
	RMCA_OMPI5_PREFIX=$$(configure-support/ompi5 --print-prefix) RMCA_REQUIRE_OMPI5=1 \
	    tools/residue/no-residue $(CARGO) test --profile $(TEST_PROFILE) --test dynamic -- ompi5:: --test-threads=2
	RMCA_OMPI5_PREFIX=$$(configure-support/ompi5 --print-prefix) RMCA_REQUIRE_OMPI5=1 \
	    tools/residue/no-residue $(CARGO) test --profile $(TEST_PROFILE) --test rofi_spawn_choice -- _ompi5 --test-threads=1

# tests/ompi5_static.rs: ours compiled into 5.0.7 (the static build above, ~6 min on 2
# cores the first time), in `make check-all` beside 4.1.4's `make check-static`.
check-static-ompi5: components-ompi5 static-ompi5
	RMCA_OMPI5_PREFIX=$$(configure-support/ompi5 --print-prefix) \
	RMCA_OMPI5_STATIC_PREFIX=$$(configure-support/static-ompi5 --print-prefix) RMCA_REQUIRE_OMPI5=1 \
	    tools/residue/no-residue $(CARGO) test --profile $(TEST_PROFILE) --test ompi5_static -- --test-threads=2

# libfabric 2.x from Debian 13's source, built once into a cache outside the checkout
# (configure-support/libfabric2); ours built against it (target/libfabric2) and the
# tests of tests/libfabric2.rs on Open MPI 4.1.4 with that libfabric loaded.
libfabric2:
	@configure-support/libfabric2

libfabric2-prefix:
	@configure-support/libfabric2 --print-prefix

LIBFABRIC2_COMPONENTS := btl-rusnic:btl:rusnic mtl-rofi:mtl:rofi
components-libfabric2:
	@prefix=$$(configure-support/libfabric2 --print-prefix) && \
	PKG_CONFIG_PATH=$$prefix/lib/pkgconfig CARGO_TARGET_DIR=target/libfabric2 \
	    $(CARGO) build --release $(foreach c,$(LIBFABRIC2_COMPONENTS),-p $(word 1,$(subst :, ,$(c))))
	$(call place_components,$(LIBFABRIC2_COMPONENTS),target/libfabric2/release,$(BUILD)/libfabric2/mca,$(filter-out %rfixture.txt,$(HELP_FILES)))

# rofi on 2.1 beside 1.17, the stock ofi MTL and vader (tools/bench/libfabric2).
bench-libfabric2: components components-libfabric2 bench-tool
	tools/bench/libfabric2 $(BENCH_ARGS)

# The same against Open MPI 5.0 as well (target/libfabric2-ompi5 → build/libfabric2-ompi5/mca).
components-libfabric2-ompi5:
	@lf=$$(configure-support/libfabric2 --print-prefix) && ompi=$$(configure-support/ompi5 --print-prefix) && \
	PKG_CONFIG_PATH=$$lf/lib/pkgconfig OMPI_PREFIX=$$ompi CARGO_TARGET_DIR=target/libfabric2-ompi5 \
	    $(CARGO) build --release $(foreach c,$(LIBFABRIC2_COMPONENTS),-p $(word 1,$(subst :, ,$(c))))
	$(call place_components,$(LIBFABRIC2_COMPONENTS),target/libfabric2-ompi5/release,$(BUILD)/libfabric2-ompi5/mca,$(filter-out %rfixture.txt,$(HELP_FILES)))

# tests/libfabric2.rs on Open MPI 4.1.4 and 5.0; LIBFABRIC2_TESTS narrows it (cargo
# test filters).
check-libfabric2: components components-libfabric2 components-libfabric2-ompi5
	RMCA_LIBFABRIC2_PREFIX=$$(configure-support/libfabric2 --print-prefix) RMCA_REQUIRE_LIBFABRIC2=1 \
	RMCA_OMPI5_PREFIX=$$(configure-support/ompi5 --print-prefix) RMCA_REQUIRE_OMPI5=1 \
	    tools/residue/no-residue $(CARGO) test --profile $(TEST_PROFILE) --test libfabric2 -- --test-threads=2 $(LIBFABRIC2_TESTS)

# A CUDA-aware Open MPI 4.1.4 (Debian 12's source, --with-cuda on the headers of NVIDIA's
# PyPI wheel), built once into a cache outside the checkout (configure-support/ompi-cuda;
# ~8 min on 2 cores the first time); rsmcuda built against it (target/ompi-cuda →
# build/ompi-cuda/mca: CUDA support changes Open MPI's structures); and tests/cuda.rs,
# device buffers end to end through rsmcuda and the stock smcuda on the CUDA driver
# stand-in (tools/cuda-standin), on 4.1.4 and on 5.0.7.
ompi-cuda:
	@configure-support/ompi-cuda

ompi-cuda-prefix:
	@configure-support/ompi-cuda --print-prefix

CUDA_COMPONENTS := btl-rsmcuda:btl:rsmcuda
components-ompi-cuda:
	@prefix=$$(configure-support/ompi-cuda --print-prefix) && \
	OMPI_PREFIX=$$prefix CARGO_TARGET_DIR=target/ompi-cuda \
	    $(CARGO) build --release $(foreach c,$(CUDA_COMPONENTS),-p $(word 1,$(subst :, ,$(c))))
	$(call place_components,$(CUDA_COMPONENTS),target/ompi-cuda/release,$(BUILD)/ompi-cuda/mca,$(filter-out %rfixture.txt,$(HELP_FILES)))

# Both series: 4.1.4 here, and the 5.0.7 of check-ompi5 (configured with CUDA there).
check-cuda: components-ompi-cuda components-ompi5 cuda-standin gpu-bundle
	RMCA_OMPI_CUDA_PREFIX=$$(configure-support/ompi-cuda --print-prefix) \
	RMCA_OMPI5_PREFIX=$$(configure-support/ompi5 --print-prefix) \
	RMCA_CUDA_INCLUDE=$$(configure-support/cuda-headers)/include RMCA_REQUIRE_OMPI_CUDA=1 \
	    tools/residue/no-residue $(CARGO) test --profile $(TEST_PROFILE) --test cuda -- --test-threads=2

# build/gpu-bundle/rmca-gpu-bundle.tar.xz (<= 64 MiB): the CUDA-aware 4.1.4 and 5.0.7
# prefixes (run-time parts), rsmcuda for each, tests/cuda's programs and a `run`
# script, for a machine with a real GPU (configure-support/gpu-bundle). The programs
# link against the stand-in's libcuda.so (RMCA_CUDA_STANDIN_DIR, default
# build/cuda-standin), which is not packed.
gpu-bundle: ompi5 components-ompi-cuda components-ompi5 cuda-standin
	@configure-support/gpu-bundle

static-ompi:
	@configure-support/static-ompi

check-static: components static-ompi
	RMCA_REQUIRE_STATIC_OMPI=1 $(CARGO) test --profile $(TEST_PROFILE) --test static_build -- --test-threads=2

.PHONY: validate validate-ci validate-tool
validate-tool:
	$(CARGO) build --release -p rmca-validate

# VALIDATE_SERIES: the Open MPI series to validate on (4.1: Debian's, build/mca; 5.0: the
# 5.0.7 of `make ompi5`, build/ompi5/mca, both built first when asked for).
VALIDATE_SERIES ?= 4.1,5.0
VALIDATE_DEPS := components $(if $(findstring 5.0,$(VALIDATE_SERIES)),components-ompi5)
# The 5.0 prefix for the tool; a failure to build it fails the target.
define run_validate
	@set -e; $(if $(findstring 5.0,$(VALIDATE_SERIES)),prefix=$$(configure-support/ompi5 --print-prefix); export RMCA_OMPI5_PREFIX=$$prefix;) \
	$(PROFILE_DIR)/rmca-validate --series $(VALIDATE_SERIES) $(1) $(VALIDATE_ARGS)
endef

validate: $(VALIDATE_DEPS) validate-tool
	$(call run_validate,)

validate-ci: $(VALIDATE_DEPS) validate-tool
	$(call run_validate,--ci)

clean:
	rm -rf $(BUILD)
	$(CARGO) clean

# Ours built and tested inside a Debian 13 (trixie) root made by debootstrap, with
# Debian's own Open MPI 5.0.7 packages and cargo from trixie-backports, as the README's
# Debian 13 section installs them (tests/debian13/check; the root's tarball cached in
# ~/.cache/rmca by configure-support/debian-root). Needs root. The layout check across
# builds of 5.0.7 (tests/debian13/cross-build) also needs the from-source 5.0.7 and ours
# built against it (make components-ompi5; check-ompi5 runs before it in .ci/run).
check-debian13: components-ompi5
	RMCA_CROSS_PREFIX=$$(configure-support/ompi5 --print-prefix) \
	    RMCA_CROSS_COMPONENTS=$(BUILD)/ompi5/mca tests/debian13/check

# `make validate` inside that root, on Debian's Open MPI 5.0.7: MPICH's suite, Debian
# 13's LAMMPS and GROMACS, ours beside Debian's stock components (VALIDATE_ARGS as for
# validate). Needs root; long (as make validate on 5.0).
validate-debian13:
	RMCA_DEBIAN13_VALIDATE="--jobs 2 $(VALIDATE_ARGS)" tests/debian13/check
