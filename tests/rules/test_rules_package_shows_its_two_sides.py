"""The rules package's two sides: importing the judgement loads nothing of the bus side (nor
nats-py), the bus side's names are still there when asked for, and the package's docstring
names every module (``pyproject.toml``'s import contract keeps the sides apart)."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys

import pytest

import consumers.rules

PURE_IMPORT = """
import sys
import consumers.rules.signatures, consumers.rules.engine, consumers.rules.live
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("nats", "prometheus_client")
                or m.startswith(("controller.bus", "consumers.rules.service", "consumers.rules.replica")))
print(loaded)
"""


def test_a_pure_import_loads_no_bus_side_nor_nats() -> None:
    done = subprocess.run([sys.executable, "-c", PURE_IMPORT], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]", done.stdout


def test_the_bus_sides_names_load_when_asked_for() -> None:
    from consumers.rules import service

    assert consumers.rules.RulesService is service.RulesService
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = consumers.rules.Nothing


def test_the_docstring_names_every_module_of_the_package() -> None:
    doc = consumers.rules.__doc__ or ""
    named = set(re.findall(r"[a-z_]+", doc))
    modules = {m.name for m in pkgutil.iter_modules(consumers.rules.__path__)}

    assert sorted(modules - named) == []
