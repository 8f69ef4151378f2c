# Tether: build, install and test driver (GNU make).
#
#   make [build]                 cargo build, then lay out build/{bin,lib}; the Fortran
#                                module into build/include and build/lib when gfortran is there
#   make install PREFIX=DIR      bin, lib, include, pkg-config and CMake files
#   make test                    format, lint, cargo tests, multi-process tests
#   make python                  pip-install the Python package into $(PYTHON)
#   make deps                    what a fresh Debian machine needs
#   make demo                    the heat coupling example (Fortran + MPI): file, Tether and
#                                mixed-MPI (MPICH + Open MPI) versions
#   make bench                   benches/compare: tether bench against its baselines,
#                                into docs/PERFORMANCE.md and docs/perf_*.png
#   make fuzz                    every fuzz target (fuzz/, cargo-fuzz on nightly) in turn,
#                                FUZZ_TIME seconds each (600); FUZZ_TARGETS picks some
#   make header | check-format | lint | loom | demo-c | demo-python | clean
#
# Variables: PREFIX (/usr/local), DESTDIR (staging root for packagers),
# CARGO, PYTHON, CARGO_TARGET_DIR (honoured as cargo honours it), FC and
# FFLAGS (the Fortran compiler, gfortran, and its flags).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := all

PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
PYTHON ?= python3
# make predefines FC as f77; only a user's own choice replaces gfortran.
ifeq ($(origin FC),default)
FC := gfortran
endif
FFLAGS ?= -O2

# rustup puts cargo in $CARGO_HOME/bin, which a fresh shell may not have
# on its PATH yet; it is only a fallback after the user's own PATH.
export PATH := $(PATH):$(or $(CARGO_HOME),$(HOME)/.cargo)/bin

# From Cargo.toml's [workspace.package]: the version installed, and the
# oldest Rust that builds it.
workspace_field = $(shell sed -n '/^\[workspace\.package\]/,/^\[/s/^$(1) *= *"\(.*\)"/\1/p' Cargo.toml)
VERSION := $(call workspace_field,version)
RUST_VERSION := $(call workspace_field,rust-version)
CARGO_OUT := $(or $(CARGO_TARGET_DIR),target)/release

# The layout tests and users link against: C needs -Iinclude (the source of
# the headers) and -Lbuild/lib -ltether; Fortran -Ibuild/include (the .mod
# files) and -Lbuild/lib -ltether_fortran -ltether.
BUILD_BIN := build/bin
BUILD_LIB := build/lib

# The Fortran module (fortran/, in dependency order): its .mod files go to
# build/include, its objects into libtether_fortran.{a,so}, which sit on
# top of libtether.
FORTRAN_SOURCES := $(addprefix fortran/,tether_c.f90 tether_support.f90 tether_setup.f90 \
                   tether_p2p.f90 tether_collectives.f90 tether_fields.f90 tether_onesided.f90 tether_active.f90 \
                   tether.f90)
FORTRAN_MODULES := $(patsubst fortran/%.f90,build/include/%.mod,$(FORTRAN_SOURCES))
FORTRAN_OBJECTS := $(patsubst fortran/%.f90,build/fortran/%.o,$(FORTRAN_SOURCES))
FORTRAN_LIBS := $(BUILD_LIB)/libtether_fortran.a $(BUILD_LIB)/libtether_fortran.so

# Native libraries that libtether.a needs (rustc --print native-static-libs,
# less the -lc every link has); the pkg-config file's Libs.private.
LIBS_PRIVATE := -lgcc_s -lutil -lrt -lpthread -lm -ldl

# Install layout. The CMake package config finds the prefix from its own
# location (PREFIX/lib/cmake/Tether), so bindir, libdir and includedir are
# fixed below PREFIX. The Fortran sources go to include/tether-fortran.
BINDIR := $(DESTDIR)$(PREFIX)/bin
LIBDIR := $(DESTDIR)$(PREFIX)/lib
INCLUDEDIR := $(DESTDIR)$(PREFIX)/include
PKGCONFIGDIR := $(LIBDIR)/pkgconfig
CMAKEDIR := $(LIBDIR)/cmake/Tether

# Installed package descriptions, generated from the templates in
# pkgconfig/ and cmake/ (TetherConfig.cmake has the component `fortran`,
# tether::fortran; tether-fortran.pc is installed with the module).
PKGCONFIG_FILES := tether.pc
CMAKE_FILES := TetherConfig.cmake TetherConfigVersion.cmake
HEADERS := include/tether.h include/tether_mpi.h

# Debian packages for building, the MPI tests and the install tests. Open
# MPI is installed beside MPICH for the tests and the demo that couple a
# program of each (their commands are named: mpicc.mpich, mpirun.openmpi).
APT_PACKAGES := build-essential ca-certificates pkg-config cmake mpich libmpich-dev \
                openmpi-bin libopenmpi-dev python3 python3-pytest iproute2 gfortran libucx-dev
# ZeroMQ for the `tether bench` baseline (MPICH is in APT_PACKAGES).
APT_BENCH_PACKAGES := libzmq3-dev

.PHONY: all build fortran header install check-format lint loom test demo demo-c demo-python demo-ml clean python \
        bench fuzz deps deps-system deps-rust deps-pytest deps-python deps-bench deps-ml

all: build

# cargo decides what is stale; a copy is replaced only when it differs, by
# `install` (a new file, so running processes keep the old one mapped).
build:
	@$(CARGO) build --release -p tether-clib -p tether-cli
	sync() { cmp -s "$$1" "$$2" || install -D -m "$$3" "$$1" "$$2"; }
	sync $(CARGO_OUT)/tether $(BUILD_BIN)/tether 0755
	sync $(CARGO_OUT)/libtether_clib.so $(BUILD_LIB)/libtether.so 0755
	sync $(CARGO_OUT)/libtether_clib.a $(BUILD_LIB)/libtether.a 0644
	if command -v $(FC) >/dev/null; then
	  $(MAKE) --no-print-directory -s fortran
	else
	  echo "make build: $(FC) not found, so the Fortran module is not built (make deps installs gfortran)" >&2
	fi

fortran: $(FORTRAN_LIBS)

# Each source is compiled after the modules it uses (FORTRAN_SOURCES' order).
$(FORTRAN_OBJECTS) &: $(FORTRAN_SOURCES)
	@mkdir -p build/fortran build/include
	for src in $(FORTRAN_SOURCES); do
	  $(FC) $(FFLAGS) -std=f2018 -Wall -fPIC -Jbuild/include -c "$$src" -o "build/fortran/$$(basename "$$src" .f90).o"
	done

$(BUILD_LIB)/libtether_fortran.a: $(FORTRAN_OBJECTS)
	@rm -f $@
	ar rcs $@ $^

# $ORIGIN: libtether_fortran.so finds libtether.so beside it, in build/lib
# as in an installed prefix.
$(BUILD_LIB)/libtether_fortran.so: $(FORTRAN_OBJECTS) $(BUILD_LIB)/libtether.so
	@$(FC) -shared -o $@ $(FORTRAN_OBJECTS) -Wl,-soname,libtether_fortran.so \
	  -L$(BUILD_LIB) -ltether '-Wl,-rpath,$$ORIGIN'

# The `tether` Python package (pyproject.toml: maturin builds
# crates/tether-python into python/tether), installed into $(PYTHON);
# cargo rebuilds only what changed.
python:
	PIP_ROOT_USER_ACTION=ignore $(PYTHON) -m pip install --quiet --no-build-isolation --no-deps .

header:
	TETHER_UPDATE_HEADER=1 $(CARGO) test -p tether-capi --test header

install: build
	@test -n "$(VERSION)" || { echo "make install: no version in Cargo.toml's [workspace.package]" >&2; exit 1; }
	install -d $(BINDIR) $(LIBDIR) $(INCLUDEDIR) $(PKGCONFIGDIR) $(CMAKEDIR)
	install -m 0755 $(BUILD_BIN)/tether $(BINDIR)/tether
	install -m 0755 $(BUILD_LIB)/libtether.so $(LIBDIR)/libtether.so
	install -m 0644 $(BUILD_LIB)/libtether.a $(LIBDIR)/libtether.a
	install -m 0644 $(HEADERS) $(INCLUDEDIR)/
	# A template's @VERSION@, @PREFIX@ and @LIBS_PRIVATE@ become their values.
	fill() {
	  sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@PREFIX@|$(PREFIX)|g' \
	      -e 's|@LIBS_PRIVATE@|$(LIBS_PRIVATE)|g' "$$1" > "$$2"
	  chmod 0644 "$$2"
	}
	for f in $(PKGCONFIG_FILES); do fill pkgconfig/$$f.in $(PKGCONFIGDIR)/$$f; done
	if [[ -f $(BUILD_LIB)/libtether_fortran.so ]]; then
	  install -d $(INCLUDEDIR)/tether-fortran
	  install -m 0755 $(BUILD_LIB)/libtether_fortran.so $(LIBDIR)/
	  install -m 0644 $(BUILD_LIB)/libtether_fortran.a $(LIBDIR)/
	  install -m 0644 $(FORTRAN_MODULES) $(INCLUDEDIR)/
	  install -m 0644 $(FORTRAN_SOURCES) $(INCLUDEDIR)/tether-fortran/
	  fill pkgconfig/tether-fortran.pc.in $(PKGCONFIGDIR)/tether-fortran.pc
	else
	  echo "make install: no Fortran module was built ($(FC) missing), so none is installed" >&2
	fi
	for f in $(CMAKE_FILES); do fill cmake/$$f.in $(CMAKEDIR)/$$f; done
	echo "Tether $(VERSION) installed into $(DESTDIR)$(PREFIX)"

check-format:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The shared-memory ring's atomics, model-checked by loom under every
# interleaving (its own target directory: --cfg loom rebuilds the crate).
loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(or $(CARGO_TARGET_DIR),target)/loom \
	  $(CARGO) test -p tether-ring --release --test loom

# The fuzz targets (docs/FUZZING.md), one at a time, each for FUZZ_TIME
# seconds; new inputs go into fuzz/corpus/<target>, a crash stops the run
# and leaves its input in fuzz/artifacts/<target>. Needs the nightly
# toolchain and cargo-fuzz (cargo install cargo-fuzz); `make test` replays
# the corpora on stable without them.
FUZZ_TIME ?= 600
FUZZ_TARGETS ?= frame_header hello file_prefix rendezvous engine field_descriptions \
                dispatch link onesided handshake

fuzz:
	@command -v cargo-fuzz >/dev/null || { echo "make fuzz: cargo-fuzz is missing (cargo install cargo-fuzz)" >&2; exit 1; }
	cd fuzz
	for target in $(FUZZ_TARGETS); do
	  echo "make fuzz: $$target for $(FUZZ_TIME) s"
	  $(CARGO) +nightly fuzz run "$$target" -- -max_total_time=$(FUZZ_TIME) -print_final_stats=1
	done

# The README's test command. Steps run in this order even under -j, each
# shown as it starts.
test:
	@set -x
	$(MAKE) --no-print-directory check-format
	$(MAKE) --no-print-directory lint
	$(CARGO) test --workspace
	$(MAKE) --no-print-directory loom
	$(MAKE) --no-print-directory build
	$(MAKE) --no-print-directory python
	$(PYTHON) -m pytest -q tests

bench: build
	$(PYTHON) benches/compare --no-make

demo-python: build python
	bash examples/python_coupling_demo.sh

# The README's demo: examples/heat3d, file-coupled, Tether and (with Open MPI
# installed beside MPICH) mixed-MPI versions; TRACE=dir records them
# (TETHER_TRACE) and prints who waited for whom.
demo: build
	bash examples/heat3d/run.sh $(if $(TRACE),--trace $(TRACE))

# The online-learning showcase: a Fortran/MPI simulation and a Python
# model that trains on its fields as they arrive, over each transport.
demo-ml: build python
	$(PYTHON) examples/ml/showcase.py --plot build/examples/ml/showcase_ml.png

# The smaller C example: a 1-D heat solver and a sensor.
demo-c: build
	bash examples/coupled_demo.sh

clean:
	$(CARGO) clean
	rm -rf build

# --- deps: idempotent, silent when everything is there ---------------------

deps:
	@$(MAKE) --no-print-directory -s deps-system
	$(MAKE) --no-print-directory -s deps-rust
	$(MAKE) --no-print-directory -s deps-pytest
	$(MAKE) --no-print-directory -s deps-python
	$(MAKE) --no-print-directory -s deps-bench
	$(MAKE) --no-print-directory -s deps-ml

# Debian packages; as root they are installed (rustup too when there is no
# cargo and Debian has it), otherwise the command to run is printed.
#
# Which MPI mpicc, mpifort, mpirun, mpiexec and /usr/include/<arch>/mpi mean
# is decided by Debian's alternatives `mpi`, `mpirun` and `mpi-<arch>`, in
# which Open MPI (priority 50) outranks MPICH (40): installing openmpi-bin
# would switch a machine where they meant MPICH to Open MPI. So the
# alternatives are recorded before installing and set back after; one that
# did not exist before (a fresh machine) is set to MPICH's, the MPI that
# everything here uses unless told otherwise.
deps-system:
	@missing=()
	for p in $(APT_PACKAGES) $(APT_BENCH_PACKAGES); do
	  [[ "$$(dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null)" == "install ok installed" ]] || missing+=("$$p")
	done
	want_rustup=0
	command -v cargo >/dev/null || command -v rustup >/dev/null || want_rustup=1
	(( $${#missing[@]} || want_rustup )) || exit 0
	# The MPI alternatives as they are: name -> value.
	declare -A mpi_before=()
	while read -r name _ value; do
	  if [[ $$name =~ ^mpi(run|-.+)?$$ ]]; then mpi_before[$$name]=$$value; fi
	done < <(update-alternatives --get-selections 2>/dev/null || true)
	if ! command -v apt-get >/dev/null || (( $$(id -u) != 0 )); then
	  (( want_rustup )) && missing+=(rustup)
	  echo "make deps: not root or no apt-get, so nothing is installed; as root run (or install the equivalents):" >&2
	  echo "  apt-get update && apt-get install -y $${missing[*]}" >&2
	  if [[ " $${missing[*]} " == *" openmpi-bin "* ]]; then
	    arch=$$(gcc -print-multiarch 2>/dev/null || echo "$$(uname -m)-linux-gnu")
	    declare -A mpich=([mpi]=/usr/bin/mpicc.mpich [mpirun]=/usr/bin/mpirun.mpich [mpi-$$arch]=/usr/include/$$arch/mpich)
	    echo "  then keep mpicc, mpifort, mpirun and mpiexec on the MPI they meant (Open MPI's packages take them over):" >&2
	    for name in mpi mpirun mpi-$$arch; do
	      echo "  update-alternatives --set $$name $${mpi_before[$$name]:-$${mpich[$$name]}}" >&2
	    done
	  fi
	  exit 0
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	if (( want_rustup )) && [[ -n "$$(apt-cache madison rustup 2>/dev/null)" ]]; then missing+=(rustup); fi
	(( $${#missing[@]} )) || exit 0
	echo "make deps: installing $${missing[*]}"
	apt-get install -y -qq --no-install-recommends "$${missing[@]}" >/dev/null
	# Every MPI alternative back to what it was, or to MPICH's if it is new.
	while read -r name _ value; do
	  [[ $$name =~ ^mpi(run|-.+)?$$ ]] || continue
	  choices=$$(update-alternatives --list "$$name" 2>/dev/null || true)
	  want=$${mpi_before[$$name]:-$$(grep -m1 mpich <<<"$$choices" || true)}
	  [[ -n $$want && $$want != "$$value" ]] || continue
	  if grep -qxF -- "$$want" <<<"$$choices"; then
	    update-alternatives --quiet --set "$$name" "$$want"
	    echo "make deps: update-alternatives --set $$name $$want (installing had made it $$value)"
	  else
	    echo "make deps: $$name was $$want, which is no longer installed; it stays $$value" >&2
	  fi
	done < <(update-alternatives --get-selections)

# A Rust toolchain (Cargo.toml's rust-version or newer) with rustfmt and
# clippy, through rustup when cargo is missing.
deps-rust:
	@if ! command -v $(CARGO) >/dev/null; then
	  if ! command -v rustup >/dev/null; then
	    echo "make deps: cargo is missing and this system has no rustup package;" >&2
	    echo "  install Rust ($(RUST_VERSION) or newer) with rustup, see https://rustup.rs, then run make deps again" >&2
	    exit 1
	  fi
	  rustup toolchain install stable --profile minimal --component rustfmt,clippy
	  rustup default stable
	fi
	command -v $(CARGO) >/dev/null || { echo "make deps: rustup installed Rust but cargo is not on PATH" >&2; exit 1; }
	have=$$(rustc --version | cut -d' ' -f2)
	if ! printf '%s\n' "$(RUST_VERSION)" "$${have%%-*}" | sort -V -C; then
	  echo "make deps: rustc $$have is older than $(RUST_VERSION); update it (rustup update stable)" >&2
	  exit 1
	fi
	if ! $(CARGO) fmt --version >/dev/null 2>&1 || ! $(CARGO) clippy --version >/dev/null 2>&1; then
	  command -v rustup >/dev/null || { echo "make deps: install rustfmt and clippy for this Rust toolchain" >&2; exit 1; }
	  rustup component add rustfmt clippy
	fi

# pytest for $(PYTHON), which need not be Debian's python3 (pyenv, venv).
deps-pytest:
	@$(PYTHON) -m pytest --version >/dev/null 2>&1 && exit 0
	echo "make deps: $(PYTHON) has no pytest; installing it with pip"
	$(PYTHON) -m pip install --quiet pytest

# What the Python package needs to build (maturin) and its tests need
# (numpy, mypy for the stub check), for $(PYTHON).
PYTHON_PACKAGES := maturin numpy mypy

deps-python:
	@missing=()
	for p in $(PYTHON_PACKAGES); do $(PYTHON) -c "import $$p" 2>/dev/null || missing+=("$$p"); done
	(( $${#missing[@]} )) || exit 0
	echo "make deps: $(PYTHON) lacks $${missing[*]}; installing with pip"
	PIP_ROOT_USER_ACTION=ignore $(PYTHON) -m pip install --quiet "$${missing[@]}"

# matplotlib, for the plots of benches/compare (without it the report is
# written without plots).
BENCH_PYTHON_PACKAGES := matplotlib

deps-bench:
	@missing=()
	for p in $(BENCH_PYTHON_PACKAGES); do $(PYTHON) -c "import $$p" 2>/dev/null || missing+=("$$p"); done
	(( $${#missing[@]} )) || exit 0
	echo "make deps: $(PYTHON) lacks $${missing[*]}; installing with pip"
	PIP_ROOT_USER_ACTION=ignore $(PYTHON) -m pip install --quiet "$${missing[@]}"

# scikit-learn, the neural network library of the online-learning showcase
# (make demo-ml). PyTorch works there too but is not installed: its only
# wheel reachable here brings the CUDA libraries (docs/showcase_ml.md).
deps-ml:
	@$(PYTHON) -c "import sklearn" 2>/dev/null && exit 0
	echo "make deps: $(PYTHON) lacks scikit-learn; installing with pip"
	PIP_ROOT_USER_ACTION=ignore $(PYTHON) -m pip install --quiet scikit-learn
