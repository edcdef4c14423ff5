"""Write ``requirements.lock``: the runtime dependencies the image installs, pinned, with hashes.

``make lock`` runs this after a change of ``pyproject.toml``'s dependencies. pip resolves the
dependencies (not the extras, not the dev groups) for this machine's platform — the image's:
CPython 3.11 on Linux x86_64 — into a ``pylock.toml``, which is turned into a requirements
file that ``pip install --require-hashes`` checks, so every image built from one commit gets the
same, reviewed versions.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    with tempfile.TemporaryDirectory() as tmp:
        requirements, lock = Path(tmp, "requirements.in"), Path(tmp, "pylock.toml")
        requirements.write_text("\n".join(dependencies) + "\n")
        command = [sys.executable, "-m", "pip", "lock", "--quiet", "-r", str(requirements), "-o", str(lock)]
        subprocess.run(command, check=True)
        packages = tomllib.loads(lock.read_text())["packages"]
    lines = [
        "# The image's runtime dependencies, pinned with hashes: `make lock` writes this file",
        "# (deploy/image/lock.py) from pyproject.toml's dependencies; do not edit it by hand.",
    ]
    for package in sorted(packages, key=lambda p: p["name"]):
        hashes = sorted(
            f"--hash=sha256:{artifact['hashes']['sha256']}"
            for artifact in [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        )
        lines.append(" \\\n    ".join([f"{package['name']}=={package['version']}", *hashes]))
    (ROOT / "requirements.lock").write_text("\n".join(lines) + "\n")
    print(f"requirements.lock: {len(packages)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
