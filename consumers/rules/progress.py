"""Progress counters in training output: the step, iteration or batch a rank says it reached.

The formats, as the trainers and loggers print them:

- a progress bar — tqdm (PyTorch Lightning, Hugging Face, plain loops) prints
  ``45%|████▌     | 450/1000 [03:20<04:05,  2.24it/s]``, Keras ``120/1875 [====>.....]``:
  ``<n>/<total> [``;
- Megatron-LM: ``iteration      100/    1000 | consumed samples: …``;
- DeepSpeed: ``[Rank 0] step=100, skipped=0, lr=[…]``; a dict logged by a trainer:
  ``{'loss': 0.51, 'step': 100}`` or ``"global_step": 100``;
- a plain loop: ``step 100``, ``Step: 100``, ``iter 100``, ``iteration 100``;
- Keras' epoch header ``Epoch 3/10`` (coarse, but a counter).

A counter that goes down (a bar restarted for the next epoch) starts a new stretch:
:func:`cumulative` adds the stretches up, so a rate is steps per second however the trainer
counts. Numbers are bounded (at most 12 digits) and every pattern is linear in the line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from controller.contract.logs import LogLine

__all__ = ["cumulative", "last_steps", "step_of"]

_PATTERNS = (
    re.compile(r"(?:^|[\s|])(?P<n>\d{1,12})/(?P<total>\d{1,12}) \["),  # tqdm, Keras batches
    re.compile(r"\biteration\s{0,20}(?P<n>\d{1,12})/\s{0,20}\d{1,12}\s{0,4}\|"),  # Megatron-LM
    re.compile(r"""\b(?:global_)?step['"]?\s{0,3}[=:]\s{0,3}(?P<n>\d{1,12})\b""", re.IGNORECASE),
    re.compile(r"\b(?:step|iter|iteration)\s{1,3}#?(?P<n>\d{1,12})\b", re.IGNORECASE),
    re.compile(r"^\s{0,8}Epoch (?P<n>\d{1,6})/\d{1,6}\s*$"),  # Keras
)


def step_of(text: str) -> int | None:
    """The progress counter ``text`` states, if it is one of the known formats."""
    for pattern in _PATTERNS:
        found = pattern.search(text)
        if found is not None:
            return int(found.group("n"))
    return None


def last_steps(lines: Sequence[LogLine]) -> dict[int | None, tuple[int, int]]:
    """Per rank (None: untagged output), the timestamp (ns) and counter of its last progress line."""
    found: dict[int | None, tuple[int, int]] = {}
    for line in lines:
        step = step_of(line.text)
        if step is not None and line.ts >= found.get(line.rank, (0, 0))[0]:
            found[line.rank] = (line.ts, step)
    return found


def cumulative(steps: Sequence[int]) -> list[int]:
    """Counters as read (in time order) added up across restarts of the count: a counter lower
    than the one before starts a new stretch from zero."""
    total, previous, out = 0, 0, []
    for step in steps:
        total += step - previous if step >= previous else step
        previous = step
        out.append(total)
    return out
