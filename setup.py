"""Which packages the wheel holds (everything else is in ``pyproject.toml``).

The code folders, plus two of the repository's top-level folders shipped inside the package
that reads them, so an installed wheel works from any directory: ``migrations/`` as
``controller.store.migrations`` and ``examples/scenarios/`` as ``controller.testing.scenarios``.
"""

from setuptools import find_packages, setup

MAPPED = {"controller.store.migrations": "migrations", "controller.testing.scenarios": "examples/scenarios"}

setup(
    packages=[
        *find_packages(include=["controller*", "watchers*", "consumers*"]),
        *MAPPED,
        "controller.store.migrations.versions",
    ],
    package_dir=MAPPED,
)
