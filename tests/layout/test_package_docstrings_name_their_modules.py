"""Each package's docstring names every module and subpackage it holds, so the docstring is a true
map of the room: a module added, moved or renamed without its package's docstring fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = [
    "controller/bus",
    "controller/store",
    "controller/kube",
    "controller/contract",
    "controller/api",
    "watchers",
    "consumers/notify",
    "consumers/audit",
    "consumers/rules",
]


def members(package: Path) -> list[str]:
    """The modules (less ``__init__``) and subpackages of ``package``."""
    modules = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    packages = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + packages)


def unnamed(docstring: str, names: list[str]) -> list[str]:
    """The names the docstring does not name as code: ``name``, `name` or :mod:`.name`."""
    return [n for n in names if not re.search(rf"[`.]{re.escape(n)}`", docstring)]


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_docstring_names_each_module(package: str) -> None:
    path = ROOT / package
    docstring = ast.get_docstring(ast.parse((path / "__init__.py").read_text())) or ""
    assert docstring, f"{package}/__init__.py has no docstring"
    assert unnamed(docstring, members(path)) == []


def test_a_module_named_only_in_prose_is_not_named() -> None:
    assert unnamed("the engine, the ``models``, :mod:`.outbox`", ["engine", "models", "outbox"]) == ["engine"]
