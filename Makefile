# flowsim: `make demo` and `make test` work on a machine with only Python 3.11 and Java 17.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS := test,mpi,spark,plot,finance

.PHONY: demo test lint bench docs dist clean venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Re-installs when setup.py changes.
$(VENV)/.installed: setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e ".[docs]"
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e ".[bench]"
	touch $@

venv: $(VENV)/.installed

# The flagship job: VEGAS+ on the 8-dim double Gaussian, 1 warm-up + 5 iterations.
demo: $(VENV)/.installed
	$(BIN)/flowsim run gaussian8 --algorithm vegasplus --events 2000000 --iters 6 --skip 1 --seed 7 --quiet

# Two pytest-xdist workers: much of the suite waits (XLA compiles, process and JVM
# start-up, MPI/Spark/Dask children), so two overlap on 2 cores.  --dist loadgroup with
# tests/conftest.py: each file is one unit of work, files with the same `xdist_group`
# mark (those sharing the SparkContext) one unit, the `costly` files' units first.
# Tests marked `timing` (wall-clock limits) are left out here and run in `make bench`.
# TEST_WORKERS=0: serially, as `pytest tests` runs.
TEST_WORKERS ?= 2
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=40 tests

lint: $(VENV)/.installed
	$(BIN)/ruff check flowsim tests benchmarks examples

# pams (the anchor of benchmarks/markets.py) pins numpy < 2: a venv of its own, the
# range read from setup.py's "pams" extra.
PAMS_VENV ?= $(VENV)-pams
$(PAMS_VENV)/.installed: setup.py
	$(PYTHON) -m venv $(PAMS_VENV)
	$(PAMS_VENV)/bin/python -m pip install -q "$$(grep -o 'pams>=[^"]*' setup.py)"
	touch $@

# Each prints ratios against anchors measured in the same run; then the tests marked
# `timing` (wall-clock limits, left out of `make test`), on a machine kept quiet for it.
BENCHMARKS := plain limit rng log cold vegas threads schedule_sim mpi spark joblib_loky sweep paths envs markets
bench: $(VENV)/.installed-bench $(PAMS_VENV)/.installed
	set -e; for b in $(BENCHMARKS); do echo "== benchmarks/$$b.py"; PAMS_PYTHON=$(PAMS_VENV)/bin/python $(BIN)/python benchmarks/$$b.py; done
	$(BIN)/python -m pytest -m timing tests

docs: $(VENV)/.installed-docs
	$(BIN)/sphinx-build -W -b html docs docs/_build/html

# A zip of the package to ship to Spark executors with --py-files (no venv needed).
dist:
	mkdir -p dist
	rm -f dist/flowsim-*.zip
	$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) -c "import re, shutil; v = re.search(r'__version__ = \"([^\"]+)\"', open('flowsim/_version.py').read()).group(1); shutil.make_archive('dist/flowsim-' + v, 'zip', '.', 'flowsim')"

clean:
	rm -rf $(VENV) $(PAMS_VENV) dist docs/_build .pytest_cache
