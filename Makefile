# The README's two commands: `make demo` and `make test`. Both build the virtualenv first,
# and rebuild it only when requirements.lock or setup.py change.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint format lock bench browser docs lock-airflow

$(STAMP): requirements.lock requirements-readers.txt setup.py
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -r requirements-readers.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tfrecord-pipeline convert --manifest sample/manifest.csv --output out/sample \
		--num_shards 2 --split train=0.8,validation=0.2
	@echo "out/sample/LATEST names the published version; its folder is printed above"

# Besides ruff: vermin fails on anything newer than Python 3.10 (setup.py's python_requires; TPU
# VM images ship it), as enum.StrEnum, except* or tomllib (str.decode left out: it reads a bytes
# value taken out of a dict by a string key as a str, Python 2's); deptry fails on an import
# setup.py does not declare (config in pyproject.toml), once for the package, whose imports must
# be in install_requires or the read side's extras, once for the tests and the benchmarks, which
# may also import the test extra (ray, datasets, webdataset, streaming and litdata are
# benchmarks/requirements-peers.txt's, another venv).
DECLARED := $(VENV)/declared
lint: $(STAMP)
	$(BIN)/ruff check pipeline transforms tests sample benchmarks deploy
	$(BIN)/ruff format --check pipeline transforms tests sample benchmarks deploy
	$(BIN)/vermin --target=3.10- --violations --no-tips --eval-annotations --exclude str.decode \
		-q pipeline transforms tests sample benchmarks deploy
	$(BIN)/python tests/declared_requirements.py $(DECLARED)
	$(BIN)/deptry pipeline transforms --requirements-files $(DECLARED)/code.txt \
		--requirements-files-dev $(DECLARED)/test.txt
	$(BIN)/deptry tests benchmarks --requirements-files $(DECLARED)/code.txt,$(DECLARED)/test.txt \
		--exclude '\.venv' --ignore DEP002 --per-rule-ignores 'DEP001=ray|datasets|webdataset|streaming|litdata'

format: $(STAMP)
	$(BIN)/ruff format pipeline transforms tests sample benchmarks deploy
	$(BIN)/ruff check --fix pipeline transforms tests sample benchmarks deploy

# The HTML report's test looks at the page in a real browser: Debian's chromium, installed here
# when it is missing and apt-get can (as root). Without a browser that test is skipped, saying so.
browser:
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] \
		&& command -v apt-get >/dev/null 2>&1; then \
		echo "make test: installing Debian's chromium for the report's browser test"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
			>/dev/null; } || echo "make test: chromium could not be installed" >&2; \
	fi

# Airflow runs the nightly DAG (deploy/airflow_dag.py) in tests/test_airflow.py from an environment
# of its own: Airflow and Beam pin conflicting versions, and the DAG runs the converter from the
# project's environment as a subprocess, as a worker does. Rebuilt only when its lock changes.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
AIRFLOW_LOCK := deploy/airflow/requirements.lock
$(AIRFLOW_STAMP): $(AIRFLOW_LOCK)
	rm -rf $(AIRFLOW_VENV)
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/pip install --quiet -r $(AIRFLOW_LOCK)
	touch $@

# Re-pin Airflow (after changing the version here): its official constraint files are on GitHub;
# this resolves the release from PyPI alone and freezes what it got.
AIRFLOW_VERSION := 2.10.5
lock-airflow:
	rm -rf /tmp/tfrp-lock-airflow && $(PYTHON) -m venv /tmp/tfrp-lock-airflow
	/tmp/tfrp-lock-airflow/bin/pip install --quiet --upgrade pip
	/tmp/tfrp-lock-airflow/bin/pip install --quiet apache-airflow==$(AIRFLOW_VERSION)
	{ sed -n '/^#/p' $(AIRFLOW_LOCK); /tmp/tfrp-lock-airflow/bin/pip freeze; } > $(AIRFLOW_LOCK).new
	mv $(AIRFLOW_LOCK).new $(AIRFLOW_LOCK)

# The suite runs from a copy of the checkout (tracked and untracked files, not ignored ones) in
# an empty temporary folder, so a test or fixture that reaches outside the repository fails here
# as it would on a user's clone. The copy is installed (into a folder of its own, first on the
# path) so the tests import `tfrecord_pipeline` as users get it, not the editable install of
# this checkout. pytest exits 5 when it collected no tests: a failure, not a pass. TFRP_AIRFLOW
# names the Airflow the tests run (tests/test_airflow.py fails without one).
# $(call suite,PYTEST FLAGS) runs that copy's pytest with those flags; the tiers are markers
# (pyproject.toml, tests/conftest.py), so `make test`, `make check` and `make bench` differ only
# in them.
define suite
	@tmp=$$(mktemp -d); copy=$$tmp/tfrecord-pipeline; site=$$tmp/site; trap 'rm -rf "$$tmp"' EXIT; \
	mkdir "$$copy"; \
	git ls-files -z --cached --others --exclude-standard \
		| tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$$copy"; \
	echo "make $@: installing a copy of the checkout from $$copy and running the suite there"; \
	$(abspath $(BIN))/pip install --quiet --no-deps --no-build-isolation --target "$$site" "$$copy" \
		|| exit 1; \
	cd "$$copy" && PYTHONPATH="$$site" TFRP_AIRFLOW=$(abspath $(AIRFLOW_VENV))/bin/airflow \
		$(abspath $(BIN))/pytest -q -p no:cacheprovider $(1); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make $@: no tests were collected" >&2; exit 1; fi; \
	exit $$status
endef

# Two workers (pytest-xdist), one a core; a file's tests stay on one worker, so a module's
# fixtures are made once. Without -m, pytest leaves out the benchmark sittings (pyproject.toml).
PARALLEL := -n 2 --dist loadfile

# Everything but the benchmark sittings; the 25 slowest tests are listed at the end.
test: lint browser $(AIRFLOW_STAMP)
	$(call suite,$(PARALLEL) --durations=25)

# The fast tier, for the edit-test loop (about a minute on two cores): the pure functions, the
# DoFns called directly, and one runner-parity check (both runners, the same bytes); no slow,
# end-to-end or benchmark test.
check: lint
	$(call suite,$(PARALLEL) -m "check")

# The docs site (docs/, mkdocs.yml) into site/, which is never committed; open site/index.html
# from disk or serve it. --strict fails on a broken link, anchor or nav entry; make test builds it
# too (tests/test_docs_site.py). Built from an environment of its own, .venv-docs (MkDocs and
# its theme alone, requirements-docs.txt: seconds to make), not the test environment's GBs.
DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
$(DOCS_STAMP): requirements-docs.txt
	rm -rf $(DOCS_VENV)
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet --upgrade pip
	$(DOCS_VENV)/bin/pip install --quiet -r requirements-docs.txt
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --site-dir site

# First every benchmark script in a tiny sitting (the tests marked `bench`: they check the
# scripts still run and read back what they wrote; their figures are timings, so they are not
# part of make test), then the converter beside its peers on a generated corpus
# (BENCH_IMAGES=20000 for the full run).
BENCH_IMAGES ?= 2000
bench: $(STAMP)
	$(call suite,-m bench)
	cd benchmarks && ../$(BIN)/python bench.py $(BENCH_IMAGES)

# The same sitting with the peers the project never depends on (Ray Data, LitData, MosaicML
# Streaming), installed from benchmarks/requirements-peers.txt into an environment of their own,
# .venv-peers; without it `make bench` reports them as skipped. PEERS_PIP: pip's extra flags
# (where to find torch's CPU build: benchmarks/requirements-peers.txt says).
PEERS_VENV := .venv-peers
PEERS_PIP ?=
.PHONY: bench-peers
$(PEERS_VENV)/.installed: benchmarks/requirements-peers.txt
	rm -rf $(PEERS_VENV)
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/pip install --quiet $(PEERS_PIP) -r benchmarks/requirements-peers.txt
	touch $@

bench-peers: $(PEERS_VENV)/.installed bench

# Issue 46's figures in one sitting (about an hour here): the tiny sitting, then
# benchmarks/sitting.py: 20,000 images with every peer, 200,000 with the ratios held at scale,
# a resize's CPU beside the Pillow and OpenCV loops, gs:// against the checked floor; then
# every ratio against its target.
.PHONY: bench-sitting
bench-sitting: $(PEERS_VENV)/.installed $(STAMP)
	$(call suite,-m bench)
	cd benchmarks && ../$(BIN)/python sitting.py

# Re-pin after changing setup.py: resolve the full set again and freeze it. The CPU build's
# local label (+cpu) is dropped, so a machine without the wheel folder still finds torch.
# requirements-readers.txt is pinned by hand: see the comment at its top.
lock:
	rm -rf /tmp/tfrp-lock && $(PYTHON) -m venv /tmp/tfrp-lock
	/tmp/tfrp-lock/bin/pip install --quiet --upgrade pip
	/tmp/tfrp-lock/bin/pip install --quiet -e '.[test]'
	/tmp/tfrp-lock/bin/pip freeze --exclude-editable | grep -v '^tfrecord-pipeline' \
		| sed 's/+cpu$$//' > requirements.lock
