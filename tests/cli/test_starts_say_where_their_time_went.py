"""A start's log says where its time went: each phase's wall time, and the process's age, so
the lines of ``up``'s processes in one log line up (``controller.contract.phases``)."""

from __future__ import annotations

import subprocess
import sys
import time

from controller.contract.phases import Phases, process_age


def test_phases_are_marked_in_order_with_their_time() -> None:
    phases = Phases()
    time.sleep(0.05)
    phases.mark("first")
    phases.mark("second")

    (first, slept), (second, quick) = phases.marks
    assert (first, second) == ("first", "second")
    assert 0.05 <= slept < 1.0
    assert 0 <= quick < slept
    line = str(phases)
    assert line.startswith("first 0.0") and ", second 0.0" in line and "of the process" in line


def test_the_age_counts_from_the_process_start_not_from_the_import() -> None:
    """A process that slept before importing the module is older than the time since the import."""
    code = (
        "import time; time.sleep(0.3); "
        "from controller.contract.phases import process_age; print(process_age())"
    )
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout)
    assert 0.3 <= age < 10.0
    assert process_age() > 0
