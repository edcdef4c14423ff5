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
from collections.abc import Collection, Sequence

from controller.contract.logs import LogLine

__all__ = ["cumulative", "last_steps", "step_of"]

_BAR = re.compile(r"(?P<n>\d{1,12})/\d{1,12} \[")  # tqdm, Keras batches
_MEGATRON = re.compile(r"\biteration\s{0,20}(?P<n>\d{1,12})/\s{0,20}\d{1,12}\s{0,4}\|")
_EPOCH = re.compile(r"^\s{0,8}Epoch (?P<n>\d{1,6})/\d{1,6}\s*$")  # Keras
_STEP = re.compile(r"""\b(?:global_)?(?:[Ss]tep|STEP)['"]?\s{0,3}[=:]\s{0,3}(?P<n>\d{1,12})\b""")
_WORD = re.compile(r"\b(?:[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER(?:ATION)?)\s{1,3}#?(?P<n>\d{1,12})\b")


def _number(pattern: re.Pattern[str], text: str) -> int | None:
    found = pattern.search(text)
    return int(found.group("n")) if found is not None else None


def step_of(text: str) -> int | None:
    """The progress counter ``text`` states, if it is one of the known formats. Most lines hold
    none: plain substring tests (a few tens of nanoseconds each) spare them every pattern."""
    if "/" in text:
        if " [" in text and (n := _number(_BAR, text)) is not None:
            return n
        if "iteration" in text and (n := _number(_MEGATRON, text)) is not None:
            return n
        if "Epoch " in text and (n := _number(_EPOCH, text)) is not None:
            return n
    if "tep" in text or "TEP" in text:
        if (n := _number(_STEP, text)) is not None:
            return n
        return _number(_WORD, text)
    if "ter" in text or "TER" in text:
        return _number(_WORD, text)
    return None


def last_steps(
    lines: Sequence[LogLine], ranks: Collection[int | None] | None = None
) -> dict[int | None, tuple[int, int]]:
    """Per rank (None: untagged output), the timestamp (ns) and counter of its last progress line.
    Read from the end: once every rank of ``ranks`` (those the batch holds, if known) has been
    found, the earlier lines are not read."""
    found: dict[int | None, tuple[int, int]] = {}
    for line in reversed(lines):
        if line.rank in found:
            continue
        step = step_of(line.text)
        if step is not None:
            found[line.rank] = (line.ts, step)
            if ranks is not None and len(found) >= len(ranks):
                break
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
