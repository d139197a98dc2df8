# The course in two commands: `make lab` (learn) and `make test` (everything CI runs).
# Both build .venv from nothing with python3; nothing else is needed on the machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CUPY_STAMP := $(VENV)/.installed-cupy
WHEELHOUSE ?= wheelhouse
CHP_VERSION ?= 5.3.0
CHP    := $(VENV)/node/node_modules/.bin/configurable-http-proxy
PYTEST_WORKERS ?= 2

.PHONY: lab test unit notebooks-test notebooks gpu-check wheelhouse doctor clean

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

# The JupyterHub test (tests/test_hub.py) runs a real hub behind configurable-http-proxy, from the npm registry
# (needs node and npm; .ci/run installs them when missing). `make lab` does not need it.
$(CHP): $(STAMP)
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@$(CHP_VERSION)
	test -x $(CHP) && touch $(CHP)

## lab: install everything pinned and open JupyterLab at the start notebook (simulator mode without a GPU)
lab: $(STAMP)
	$(VENV)/bin/labkit lab

## test: install, then run labkit's unit tests, the structure tests, PTX builds and every notebook under nbval
test: $(STAMP) $(CUPY_STAMP) $(CHP)
	@start=$$(date +%s); \
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadscope tests notebooks \
	    --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
	    -p no:randomly --timeout 600 -q; status=$$?; \
	echo "make test: whole suite took $$(( $$(date +%s) - start )) s"; exit $$status

## notebooks: rebuild learner and solution notebooks from notebooks/src (and store solution outputs, sim mode)
notebooks: $(STAMP)
	$(PY) tools/build_notebooks.py --execute

## gpu-check: on a GPU machine, run every solution notebook in gpu mode and the benchmark suite
gpu-check:
	$(PYTHON) tools/gpu_check.py

## wheelhouse: labkit's wheel plus the pure-Python packages a GPU image (CuPy, numba-cuda, PyTorch, no registry) lacks
wheelhouse: $(STAMP)
	$(PY) tools/wheelhouse.py $(WHEELHOUSE)

doctor: $(STAMP)
	$(VENV)/bin/labkit doctor

clean:
	rm -rf $(VENV) .pytest_cache build src/*.egg-info
