"""Typed readers for environment variables; a bad value raises ImproperlyConfigured."""

import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def load_env_file(path) -> list[str]:
    """Set the variables of a `.env` file (KEY=VALUE lines) that the environment does not already set.

    Every process of an installation reads the same file, so a command run beside the server (ingest,
    bootstrap, reconcile) uses the server's var dir and engines without repeating them; a variable set
    in the environment still wins. Returns the names it set."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        return []
    loaded = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ImproperlyConfigured(f"{path}, line {number}: expected NAME=value, got {line!r}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if name not in os.environ:
            os.environ[name] = value
            loaded.append(name)
    return loaded


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    _check_range(name, value, minimum, maximum)
    return value


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    _check_range(name, value, minimum, maximum)
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: set[str]) -> str:
    value = os.environ.get(name, default).strip()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


_RATE = re.compile(r"^\s*(\d+)\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)s?\s*$", re.IGNORECASE)


def env_rate(name: str, default: str | None) -> str | None:
    """A request rate like `600/min` (per s, min, hour or day); `off` (or 0) means no limit (None)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    if raw.strip().lower() in ("off", "0", "none"):
        return None
    match = _RATE.match(raw)
    if not match or int(match.group(1)) < 1:
        raise ImproperlyConfigured(f"{name} must be a rate like 600/min (per s, min, hour or day) or off, got {raw!r}")
    return f"{int(match.group(1))}/{match.group(2).lower()}"


def _check_range(name, value, minimum, maximum):
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}, got {value}")
