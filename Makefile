# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
DEMO_USER ?= admin
DEMO_PASSWORD ?= loci-demo-pw

.PHONY: run test install install-test migrate demo

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(PY)
	$(PY) -m pip install -q -e .

install-test: $(PY)
	$(PY) -m pip install -q -e ".[test]"

migrate: install
	$(PY) manage.py migrate --no-input
	$(PY) manage.py collectstatic --no-input -v 0

demo: migrate
	$(PY) manage.py bootstrap --tenant demo --kb docs --user $(DEMO_USER) --password $(DEMO_PASSWORD) --superuser
	@echo "Sign in at http://127.0.0.1:8000/ as $(DEMO_USER) / $(DEMO_PASSWORD) (admin: /admin/, API docs: /api/docs/)"

run: demo
	$(PY) manage.py up

test: install-test
	$(PY) -m pytest
