# The two commands a fresh machine needs: `make demo` (the main job) and `make test` (every test).
# Both create .venv and install the project with its own PostgreSQL and NATS wheels first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck imports pytest bench up lock clean bytecode browser screenshots

# Every dependency, the test and lint tools included, at the versions of requirements-dev.lock
# (hash-checked; `make lock` writes it), then the project itself, editable, without resolving again.
$(STAMP): pyproject.toml setup.py requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

# The project's own modules compiled once (unchanged ones are skipped), as the wheel's are at
# install: every process the controller starts then loads them in a fraction of the time, also
# where PYTHONDONTWRITEBYTECODE keeps Python from caching them itself.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q controller watchers consumers benchmarks

demo: bytecode  ## replay the example scenarios end to end on the embedded PostgreSQL + NATS
	$(BIN)/mpijob-controller demo

test: check pytest  ## lint, types, layering, then every test

check: lint typecheck imports

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# PYTEST_WORKERS > 0 runs the suite on that many pytest-xdist workers, each with PostgreSQL and NATS
# of its own (tests/conftest.py); the tests mostly wait on those servers and on the processes they
# start. The tests marked `slow` (whole `up`s, the demo, the wheel, NATS clusters) are one
# `xdist_group`: one worker runs them one after another, in file order, while the other tests
# spread over the others. Other modules marked `xdist_group` run on one worker, sharing what the
# module builds once. `.venv/bin/pytest tests/...` runs a few tests on one process.
# Every worker collects the whole suite: pytest may keep the test modules it rewrote (for its
# assertions) in __pycache__, where a PYTHONDONTWRITEBYTECODE in the environment would have it
# rewrite them all in each worker on every run. 3 workers by default (the `slow` group on one of
# them; pytest 9.2 silently dropped every group: pyproject.toml pins below it): the suite takes
# about 10.5 minutes instead of about 20 on a 2-core machine (benchmarks/README.md, "The test
# suite"); `make test PYTEST_WORKERS=0` runs it on one process.
PYTEST_WORKERS ?= 3

pytest: bytecode browser
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup

# The pages' browser tests drive Debian's chromium through its chromedriver (never a downloaded browser).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	test -x /usr/bin/chromium && test -x /usr/bin/chromedriver || \
		{ $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium chromium-driver; }

screenshots: bytecode browser  ## docs/ui/*.png: every page, as the browser test opens it
	MPIJC_UI_SCREENSHOTS=docs/ui $(BIN)/pytest -q tests/ui/test_pages_in_a_browser.py

bench: bytecode  ## benchmarks, JSON results under benchmarks/results/
	$(BIN)/python -m benchmarks.ingest
	$(BIN)/python -m benchmarks.findings
	$(BIN)/python -m benchmarks.api
	$(BIN)/python -m benchmarks.webhooks

up: bytecode
	$(BIN)/mpijob-controller up

lock:  ## pin the dependencies (requirements.lock, requirements-dev.lock) after changing pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	$(BIN)/python deploy/image/lock.py

clean:
	rm -rf $(VENV) .mpijc .pytest_cache .mypy_cache .ruff_cache
