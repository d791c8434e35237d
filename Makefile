# The course's commands. `make lab` and `make test` set everything up on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# nbgrader calls alembic (and jupyter calls its subcommands) by name: put the venv first on PATH.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Jupyter refuses to run as root unless told.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# Where `make lab` keeps the student's own copies of the lessons (git-ignored).
WORK ?= $(CURDIR)/work
PIP_INSTALL := $(BIN)/python -m pip install --quiet --progress-bar off

.PHONY: setup lab reset lab-solutions formgrader test test-fast lint test-hub test-dask release outputs lock clean

## setup: create .venv with the locked dependencies (only when missing or out of date); then one line that the course and the grader's sandbox are ready, or a note for instructors when the sandbox cannot run here
setup: $(STAMP)
	@$(if $(SETUP_NOTE),$(BIN)/python -m autograder.sandbox.probe --setup-note || true,:)

# `make setup` (or plain `make`) probes whether the grader's sandbox can run on this machine:
# one line when all is ready, what to do when it cannot; never an error. Targets that only need the environment
# (`make lab`, `make test`) skip the probe.
SETUP_NOTE := $(if $(MAKECMDGOALS),$(filter setup,$(MAKECMDGOALS)),setup)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing the course's dependencies into $(VENV) (first run only; CPU-only torch)..."
	@$(PIP_INSTALL) -r requirements.lock 2>&1 | grep -v "^WARNING: Location" || true
	@$(BIN)/python -c "import torch, nbgrader, nbval" || { echo "Set-up failed: see the pip output above." >&2; exit 1; }
	@$(PIP_INSTALL) --no-deps --no-build-isolation -e . 2>&1 | grep -v "^WARNING: Location" || true
	@$(BIN)/python -c "import coursekit, autograder"
	@touch $@

## lab: open the course in JupyterLab on its start page, with your own copies of the lessons in work/ (LAB_ARGS: more jupyter lab options)
lab: setup
	$(BIN)/python -m coursekit.lab --work "$(WORK)" open $(ROOT_FLAG) $(LAB_ARGS)

## reset: start a lesson over from the release, keeping your copy in work/backups/: make reset LESSON=01_leaf_and_intermediate
reset: setup
	@test -n "$(LESSON)" || { echo "usage: make reset LESSON=<lesson>, for example make reset LESSON=01_leaf_and_intermediate" >&2; exit 2; }
	@$(BIN)/python -m coursekit.lab --work "$(WORK)" reset "$(LESSON)"

## lab-solutions: open the instructor notebooks (solutions and hidden tests) in JupyterLab
lab-solutions: setup
	$(BIN)/jupyter lab --ServerApp.root_dir=solutions $(ROOT_FLAG)

## formgrader: open nbgrader's formgrader on this course's gradebook and print its URL ([COURSE=<course root>] [PORT=8888])
# JupyterLab from the course root, with nbgrader's instructor panels (which `make lab` hides);
# it opens on the formgrader's page, /formgrader. nbgrader_exchange/ is the exchange that
# nbgrader_config.py names for one machine (git-ignored): the formgrader warns without one.
COURSE ?= $(CURDIR)
formgrader: setup
	@test -f "$(COURSE)/nbgrader_config.py" || { echo "$(COURSE) is not a course root (no nbgrader_config.py): pass COURSE=<the folder with nbgrader_config.py and gradebook.db>" >&2; exit 2; }
	@mkdir -p "$(COURSE)/nbgrader_exchange"
	@echo "Starting nbgrader's formgrader for $(abspath $(COURSE)); open the address that ends in /formgrader?token=... below (Ctrl-C stops it)."
	cd "$(COURSE)" && env -u JUPYTER_CONFIG_PATH "$(CURDIR)/$(BIN)/jupyter" lab --ServerApp.root_dir="$(abspath $(COURSE))" --LabApp.default_url=/formgrader $(if $(PORT),--ServerApp.port=$(PORT)) $(ROOT_FLAG) $(FORMGRADER_ARGS)

# axe-core, the browser tests' accessibility checker, comes from npm with the hub's proxy
# (hub/package-lock.json, into hub/node_modules). Without npm the checks skip (fail under CI).
AXE := hub/node_modules/axe-core/axe.min.js
$(AXE):
	cd hub && npm ci --no-audit --no-fund --loglevel=error

## test: run the test suite (unit tests, nbval over solutions/, release check, grading, browser)
test: setup $(if $(shell command -v npm),$(AXE))
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## test-fast: the unit tests only (the files marked `fast`): no notebook run, no grader started (under a minute); ruff first
test-fast: setup lint
	$(BIN)/python -m pytest -m "fast and not slow" $(FAST_FILES) $(PYTEST_ARGS)

# A test file is a fast one when it sets `pytestmark = pytest.mark.fast`: none of its tests
# runs a notebook, starts a grader or the hub, or trains a model, and each takes a few seconds
# at most, but for a test marked `slow` of its own, which test-fast leaves to `make test`
# (`--durations` in the suite's output shows when one has grown slow; tests/test_fast_tests.py
# holds the files to their place, and a fast file's test that starts a grader, a notebook's
# kernel or runner host, the hub or a browser fails, unless marked slow). Only the files that set the marker are
# collected: collecting the others would import the hub, the browser and Dask for nothing.
FAST_FILES = $(shell grep -l '^pytestmark = .*pytest\.mark\.fast' tests/test_*.py)

## lint: ruff over the tree, with the rules in pyproject.toml
lint: setup
	$(BIN)/ruff check .

## test-hub: the class JupyterHub's end-to-end tests (a few minutes; needs hub/node_modules: cd hub && npm ci)
test-hub: setup
	$(BIN)/python -m pytest -m hub tests/test_hub.py tests/test_hub_culler.py tests/test_hub_onsubmit.py tests/test_hub_k8s.py $(PYTEST_ARGS)

## test-dask: grading on a Dask cluster of local processes (a scheduler and workers on 127.0.0.1; a few minutes)
test-dask: setup
	$(BIN)/python -m pytest -m dask tests/test_grading_cluster.py tests/test_attacks_cluster.py $(PYTEST_ARGS)

## release: regenerate the student notebooks in notebooks/ from solutions/
release: setup
	$(BIN)/python -m autograder release

## lock: re-resolve requirements.txt into requirements.lock (maintainers, after editing requirements.txt)
lock:
	rm -rf build/lock-venv && $(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/python -m pip install --quiet -r requirements.txt
	build/lock-venv/bin/python -m pip freeze --exclude-editable | sed 's/+cpu$$//' > requirements.lock
	rm -rf build/lock-venv

clean:
	rm -rf $(VENV) gradebook.db submitted autograded feedback grading demo test-artifacts build

## outputs: re-run solution notebooks and store their outputs (LESSONS="01_leaf_and_intermediate ..." for some)
outputs: setup
	$(BIN)/python -m autograder execute $(LESSONS)

.PHONY: grade demo
DEMO_TIMEOUT ?= 20

## grade: grade a class: make grade SUBMISSIONS=<folder or .zip> [OUT=grading] [JOBS=N] [LESSONS="01_... 02_..."] [CLUSTER=tls://HOST:8786 CLUSTER_TLS="ca.pem client.pem client.key"] (see docs/GRADING.md, docs/SCALE.md)
grade: setup
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=<folder or .zip> [OUT=grading]" >&2; exit 2; }
	$(BIN)/python -m autograder grade "$(SUBMISSIONS)" --out "$(or $(OUT),grading)" $(if $(JOBS),--jobs $(JOBS)) $(if $(LESSONS),--lessons $(LESSONS)) $(if $(CLUSTER),--cluster $(CLUSTER)) $(if $(CLUSTER_TLS),--cluster-tls $(CLUSTER_TLS)) $(GRADE_ARGS)

## demo: build a small course of its own in demo/ (its own gradebook) and grade a synthetic class there; see demo/out/report.html, and `make formgrader COURSE=demo/course`
demo: setup
	$(BIN)/python -m autograder demo --timeout $(DEMO_TIMEOUT) $(GRADE_ARGS)

.PHONY: hub hub-stop

## hub: start the class's JupyterHub in the background (as root; accounts, limits, state: hub/class.toml; docs/HUB.md)
hub: setup
	$(BIN)/python hub/hubctl.py start $(if $(HUB_CONFIG),--config "$(HUB_CONFIG)")

## hub-stop: stop the class's JupyterHub and every server it started (the state folder stays)
hub-stop:
	$(BIN)/python hub/hubctl.py stop $(if $(HUB_CONFIG),--config "$(HUB_CONFIG)")
