"""Write ``requirements.lock`` (the runtime dependencies the image installs) and
``requirements-dev.lock`` (those plus the embedded extra and the test and lint groups, which
``make`` installs), pinned, with hashes.

``make lock`` runs this after a change of ``pyproject.toml``'s dependencies. pip resolves each
file's requirements (the development lock keeps the runtime lock's versions) for this machine's
platform — the image's:
CPython 3.11 on Linux x86_64 — into a ``pylock.toml``, which is turned into a requirements
file that ``pip install --require-hashes`` checks, so every image built from one commit gets the
same, reviewed versions, and every developer and CI run tests with the same test and lint
tools (a new ruff or mypy release cannot fail a commit that passed yesterday).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


LOCKS: dict[str, tuple[str, str]] = {
    "requirements.lock": (
        "The image's runtime dependencies",
        "pyproject.toml's dependencies",
    ),
    "requirements-dev.lock": (
        "`make`'s development environment",
        "pyproject.toml's dependencies, embedded extra, test and lint groups",
    ),
}


def requirements(name: str) -> list[str]:
    """What the lock file ``name`` pins, as pyproject.toml states it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = list(project["project"]["dependencies"])
    if name == "requirements-dev.lock":
        wanted += project["project"]["optional-dependencies"]["embedded"]
        for group in ("test", "lint"):
            wanted += project["dependency-groups"][group]
        runtime = (ROOT / "requirements.lock").read_text()
        wanted += re.findall(r"(?m)^([A-Za-z0-9_.-]+==\S+)", runtime)  # the image's versions
    return wanted


def write(name: str) -> int:
    """Resolve and write one lock file; the number of packages pinned."""
    with tempfile.TemporaryDirectory() as tmp:
        wanted, lock = Path(tmp, "requirements.in"), Path(tmp, "pylock.toml")
        wanted.write_text("\n".join(requirements(name)) + "\n")
        command = [sys.executable, "-m", "pip", "lock", "--quiet", "-r", str(wanted), "-o", str(lock)]
        subprocess.run(command, check=True)
        packages = tomllib.loads(lock.read_text())["packages"]
    what, source = LOCKS[name]
    lines = [
        f"# {what}, pinned with hashes: `make lock` writes this file",
        f"# (deploy/image/lock.py) from {source}; do not edit it by hand.",
    ]
    for package in sorted(packages, key=lambda p: p["name"]):
        hashes = sorted(
            f"--hash=sha256:{artifact['hashes']['sha256']}"
            for artifact in [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        )
        lines.append(" \\\n    ".join([f"{package['name']}=={package['version']}", *hashes]))
    (ROOT / name).write_text("\n".join(lines) + "\n")
    return len(packages)


def main() -> int:
    for name in LOCKS:  # the runtime lock first: the development lock keeps its versions
        print(f"{name}: {write(name)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
