"""``up`` starts the process of history and rules beside the API, the other parts once the API
answers (``controller.cli.supervisor``: a part listed after one that ``serves`` waits for its
answer): a failure after a restart waits for history and rules (their imports, the rules' warm
start), not for the API's start as well; the watchers' relist still waits, so the API's answer
does not share the start with it."""

from __future__ import annotations

from controller.cli.commands import up_parts
from controller.contract.settings import Settings


def test_history_and_rules_start_first_then_the_api_then_the_rest() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    settings.up.dispatchers = 2

    names = [name for name, *_ in up_parts(settings)]

    assert names == ["history+rules", "api", "watchers", "audit+notify+dispatch", "dispatch-2"]
