# The course in two commands: `make lab` (learn) and `make test` (everything CI runs).
# Both build .venv from nothing with python3; nothing else is needed on the machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CUPY_STAMP := $(VENV)/.installed-cupy
DOCS_STAMP := $(VENV)/.installed-docs
WHEELHOUSE ?= wheelhouse
# Python keeps its bytecode caches (__pycache__/, git-ignored): the suite starts many processes that import
# labkit (notebook kernels, MPI ranks, hub servers, pytest workers with their rewritten test modules), and where the
# environment sets PYTHONDONTWRITEBYTECODE each of them would compile the same sources again.
unexport PYTHONDONTWRITEBYTECODE
CHP_VERSION ?= 5.3.0
CHP    := $(VENV)/node/node_modules/.bin/configurable-http-proxy
PYTEST_WORKERS ?= 2
# The CUDA 13 toolchain (constraints-cu13.txt) in its own cached venv: its four wheels, and the base .venv's packages
# (a .pth that adds .venv's site-packages after its own), so `make test` runs the toolchain tests under both.
VENV13 := .venv-cu13
PY13   := $(VENV13)/bin/python
CU13_STAMP := $(VENV13)/.installed
# JupyterHub 5 (the Zero to JupyterHub chart's, constraints-hub5.txt) in its own cached venv, the same way, for tests/test_hub5.py
VENVHUB5 := .venv-hub5
PYHUB5   := $(VENVHUB5)/bin/python
HUB5_STAMP := $(VENVHUB5)/.installed
# The first GPU run's rehearsal (tests/test_rehearsal*.py): the H200 image's recorded versions (constraints-rehearsal.txt)
# in a Python 3.12 venv where the machine has one, plus labkit and its pure-Python dependencies from the wheelhouse,
# installed by tools/install_wheelhouse.sh exactly as tools/first_gpu_run.sh installs them (exports.sh: its environment).
PY312  ?= $(or $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12; do "$$p" -c '' 2>/dev/null && echo "$$p" && break; done),$(PYTHON))
VENVREH := .venv-rehearsal
REH_STAMP := $(VENVREH)/.installed

.PHONY: mutation lab test check lint types site test-cu13 unit notebooks-test notebooks gpu-check bench-sim wheelhouse doctor clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

# The tests also need CuPy with its CUDA library wheels (it imports without a GPU): the API-surface test checks every
# CuPy name labkit calls against the installed package. `make lab` does not install it (1.5 GB; add `.[cuda12]` for a GPU).
$(CUPY_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev,cuda12]"
	touch $(CUPY_STAMP)

# The website's builder (`make site`; the extra [docs]: Sphinx, MyST-NB, the book theme). `make lab` does not install it.
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev,docs]"
	touch $(DOCS_STAMP)

$(HUB5_STAMP): $(STAMP) constraints-hub5.txt tools/overlay_venv.sh
	sh tools/overlay_venv.sh $(PY) $(VENVHUB5) constraints-hub5.txt
	$(PYHUB5) -c 'import jupyterhub as j; assert j.__version__.startswith("5."), j.__version__; print("JupyterHub", j.__version__)'
	touch $(HUB5_STAMP)

$(CU13_STAMP): $(STAMP) constraints-cu13.txt tools/overlay_venv.sh
	sh tools/overlay_venv.sh $(PY) $(VENV13) constraints-cu13.txt
	$(PY13) -c 'import cuda.bindings.nvrtc as n; v = n.nvrtcVersion(); assert v[1] == 13, v; print("CUDA 13 toolchain: NVRTC", v[1:])'
	touch $(CU13_STAMP)

$(REH_STAMP): $(STAMP) constraints-rehearsal.txt constraints.txt tools/wheelhouse.py tools/install_wheelhouse.sh benchmarks/gpu-image-h200.txt
	rm -rf $(VENVREH)
	$(PY312) -m venv $(VENVREH)
	$(VENVREH)/bin/python -m pip install --quiet --no-deps -r constraints-rehearsal.txt
	$(PY) tools/wheelhouse.py $(VENVREH)/whl --image benchmarks/gpu-image-h200.txt --notebooks --no-nvcc \
	    --python-version $$($(VENVREH)/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	PY=$(VENVREH)/bin/python sh tools/install_wheelhouse.sh $(VENVREH)/whl $(VENVREH)/site $(VENVREH)/mpi > $(VENVREH)/exports.sh
	# lab 10's nvmath-python (not on the image, needs a GPU stack to import): its wheel only, signatures read with ast
	$(VENVREH)/bin/python -m pip download --quiet --no-deps -d $(VENVREH)/not-on-image nvmath-python==1.0.1
	touch $(REH_STAMP)

# The JupyterHub test (tests/test_hub.py) runs a real hub behind configurable-http-proxy, from the npm registry
# (needs node and npm; .ci/run installs them when missing). `make lab` does not need it.
$(CHP): $(STAMP)
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@$(CHP_VERSION)
	test -x $(CHP) && touch $(CHP)

## lab: install what a learner needs (pinned, without the test extras) and open JupyterLab at the start notebook (simulator mode without a GPU)
# A learner's install: labkit and what the labs need at run time (jupyterlab is among them), pinned; not the
# [dev] extras the tests use (pytest, Playwright, JupyterHub, otter-grader, jupytext: nothing a learner opens).
# On a .venv that `make test` built, the extras are already there and this adds nothing.
LAB_STAMP := $(VENV)/.installed-lab
$(LAB_STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e .
	touch $(LAB_STAMP)

lab: $(LAB_STAMP)
	$(VENV)/bin/labkit lab

## test: install, then labkit's unit tests, the structure tests, PTX builds and every notebook under nbval; beside them, at
## low priority (nice) so they use the CPU time pytest's workers leave while they wait on browsers, hubs and kernels: lint
## and types (make lint types), then the toolchain-dependent tests again under CUDA 13 (test-cu13, one worker)
test: $(STAMP) $(CUPY_STAMP) $(DOCS_STAMP) $(CHP) $(CU13_STAMP) $(HUB5_STAMP) $(REH_STAMP)
	@start=$$(date +%s); status=0; side=$$(mktemp); \
	( rc=0; nice -n 10 $(MAKE) --no-print-directory lint types || rc=1; \
	  nice -n 10 $(MAKE) --no-print-directory test-cu13 PYTEST_WORKERS=1 || rc=1; exit $$rc ) > $$side 2>&1 & side_pid=$$!; \
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder tests notebooks \
	    --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
	    -p no:randomly --timeout 600 -q --durations=20 || status=1; \
	echo "pytest finished after $$(( $$(date +%s) - start )) s"; \
	wait $$side_pid || status=1; \
	echo "== beside pytest: lint, types and the CUDA 13 toolchain tests (make lint types test-cu13) =="; cat $$side; rm -f $$side; \
	echo "make test: whole suite took $$(( $$(date +%s) - start )) s"; exit $$status

## check: the edit loop, under 90 s on 2 cores: lint and format (ruff), types (mypy), the layer test and the fast
## unit tests (no notebooks, no hub, no browser, no toolchain); `make test` is still what CI runs
FAST_TESTS := tests/test_layers.py tests/test_validate.py tests/test_hw.py tests/test_hw_arithmetic.py \
    tests/test_precision.py tests/test_scaling.py tests/test_occupancy.py tests/test_roofline.py tests/test_figstyle.py \
    tests/test_mode.py tests/test_progress.py tests/test_gradebook.py tests/test_sim_limits.py tests/test_check_core.py
check: $(STAMP)
	@start=$$(date +%s); status=0; \
	$(MAKE) --no-print-directory lint types || status=1; \
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest $(FAST_TESTS) -m "not slow and not notebook and not toolchain" \
	    -p no:randomly --timeout 120 -q --durations=5 || status=1; \
	echo "make check took $$(( $$(date +%s) - start )) s"; exit $$status

## lint: ruff's lint rules and its format (pyproject.toml [tool.ruff]) over src/labkit
lint: $(STAMP)
	$(PY) -m ruff check src/labkit
	$(PY) -m ruff format --check src/labkit

## types: mypy over src/labkit (pyproject.toml [tool.mypy])
types: $(STAMP)
	$(PY) -m mypy

## test-cu13: every test marked `toolchain` (NVRTC compiles of labs 05, 06 and 10, the CUDA C++ sources, WMMA, doctor, the
## Numba PTX of the reference kernels, the PTX audit's architectures) again under CUDA 13, found by the marker, not a list
## (only the test files that mention the word `toolchain` are collected: a marker is spelled where it is applied, and collecting all of
## tests/ to keep a sixth of them cost about 14 s of CPU)
TOOLCHAIN_FILES = $(shell grep -l toolchain tests/test_*.py)
test-cu13: $(CU13_STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY13) -m pytest -n $(PYTEST_WORKERS) -m toolchain -p no:randomly --timeout 300 -q $(TOOLCHAIN_FILES)

## site: the course as a website in site/_build/html (site/README.md): pages from what the solution notebooks store,
## nothing executed, nothing downloaded; any Sphinx warning fails it (tests/test_site.py builds and checks it in Chromium)
site: $(DOCS_STAMP)
	@start=$$(date +%s); \
	$(PY) tools/site_pages.py && \
	$(PY) -m sphinx -W --keep-going -n -q -b html -c site site/_build/src site/_build/html && \
	echo "make site: site/_build/html ($$(du -sh site/_build/html | cut -f1)) built in $$(( $$(date +%s) - start )) s"

## notebooks: rebuild learner and solution notebooks from notebooks/src (and store solution outputs, sim mode)
notebooks: $(STAMP)
	$(PY) tools/build_notebooks.py --execute

## bench-sim: time the course's reference kernels under Numba's simulator and labkit.sim (benchmarks/results/sim-speed-*)
bench-sim: $(STAMP)
	$(PY) benchmarks/sim_speed.py && $(PY) tools/readme_sim_table.py

## mutation: mutants of every exercise's reference through the exercise's own check (tools/mutation.py; the report goes
## to benchmarks/results/mutation-DATE.*; `make test` runs a seeded sample, tests/test_mutation.py)
mutation: $(STAMP)
	LABKIT_MODE=sim LABKIT_PROGRESS=off nice -n 10 $(PY) tools/mutation.py --jobs 2 --nice 10 \
		--json benchmarks/results/mutation-$$(date +%F).json --md benchmarks/results/mutation-$$(date +%F).md

## test-peer: numba-cuda's own simulator test suite, as shipped and with labkit's engine; fails on a test that passes
## only without labkit (`make test` runs it too, as tests/test_numba_peer.py)
test-peer: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) tools/numba_peer.py

## gpu-check: on a GPU machine, run every solution notebook in gpu mode and the benchmark suite
gpu-check:
	$(PYTHON) tools/gpu_check.py

## wheelhouse: labkit's wheel plus the pure-Python packages a GPU image (CuPy, numba-cuda, PyTorch, no registry) lacks
wheelhouse: $(STAMP)
	$(PY) tools/wheelhouse.py $(WHEELHOUSE)

doctor: $(STAMP)
	$(VENV)/bin/labkit doctor

clean:
	rm -rf $(VENV) $(VENV13) $(VENVHUB5) $(VENVREH) .pytest_cache build src/*.egg-info
