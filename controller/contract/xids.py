"""The driver's vocabulary of GPU trouble: the Xid catalogue (the error codes a training job meets,
what they mean, what to do) and the clock-throttle reasons DCGM reports.

An Xid is the NVIDIA driver's report of a GPU error, written to the node's kernel log
(``NVRM: Xid (PCI:0000:3b:00): 79, pid=…, GPU has fallen off the bus.``) and exported by DCGM as
the last code seen per GPU (``DCGM_FI_DEV_XID_ERRORS``). Each :class:`Xid` says in plain words
what NVIDIA's Xid documentation (its Xid catalogue and "Resolution Bucket" column) gives as the
meaning, who is at fault (``origin``) and the first thing to do (``action``), using NVIDIA's
resolution buckets:

- ``restart-app``: the program faulted on a healthy GPU; fix the program or re-run it;
- ``reset-gpu``: the GPU needs a reset (``nvidia-smi -r``) before it is trusted again: drain it;
- ``reboot-node``: only a reboot of the node recovers the GPU: drain the node;
- ``contact-support``: failing hardware: drain the node and report it for repair;
- ``see-earlier``: a consequence of an earlier Xid, which names the cause.

Codes not listed read as "a GPU error reported by the driver" of unknown origin, judged as
hardware (the safe reading: the node is checked).

:data:`THROTTLE_REASONS` are the bits of ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` (NVML's
clocks-event reasons) that mean the hardware holds the clocks down; :data:`CLOCK_REASONS` names
every bit, the normal ones (idle, application clocks, power cap) too. The rules judge by the
first, the pages show the second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CLOCK_REASONS",
    "THROTTLE_REASONS",
    "THROTTLING",
    "XIDS",
    "Xid",
    "XidLine",
    "clock_reasons",
    "parse_xid_lines",
    "pci_slot",
    "xid",
]

THROTTLE_REASONS: dict[int, str] = {
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
"""The bits that mean the hardware holds the clocks down."""
THROTTLING = sum(THROTTLE_REASONS)
"""The mask of :data:`THROTTLE_REASONS`."""
CLOCK_REASONS: dict[int, str] = {
    0x1: "idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    **THROTTLE_REASONS,
    0x10: "sync boost",
    0x100: "display clock setting",
}
"""Every bit of ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``, in words."""


def clock_reasons(mask: int) -> list[str]:
    """The reasons a bitmask names, in bit order (an unknown bit as its hexadecimal value)."""
    bits = [1 << i for i in range(mask.bit_length()) if mask & (1 << i)]
    return [CLOCK_REASONS.get(bit, f"0x{bit:x}") for bit in bits]


Origin = Literal["application", "hardware", "driver", "consequence"]
Action = Literal["restart-app", "reset-gpu", "reboot-node", "contact-support", "see-earlier"]


@dataclass(frozen=True)
class Xid:
    """One Xid code: NVIDIA's meaning in plain words, its origin and the first thing to do."""

    code: int
    meaning: str
    origin: Origin
    action: Action

    @property
    def hardware(self) -> bool:
        """Whether the GPU or the node is at fault (not the program)."""
        return self.origin in ("hardware", "driver")

    @property
    def advice(self) -> str:
        """What to do, in words."""
        return _ADVICE[self.action]


_ADVICE: dict[Action, str] = {
    "restart-app": "the GPU itself is healthy: fix the program (an illegal access or a bug in a kernel) "
    "and re-run it",
    "reset-gpu": "drain the node and reset the GPU (nvidia-smi -r) before it runs work again; re-run the "
    "job elsewhere",
    "reboot-node": "drain the node and reboot it: the GPU recovers only then; re-run the job elsewhere",
    "contact-support": "drain the node and report the GPU as failing hardware; re-run the job elsewhere",
    "see-earlier": "look at the Xid before it on the same GPU, which names the cause",
}

_NVLINK: tuple[str, Origin, Action] = ("NVLink error: a link between GPUs failed", "hardware", "reset-gpu")

_TABLE: tuple[tuple[int, str, Origin, Action], ...] = (
    # code, NVIDIA's meaning in plain words, origin, resolution bucket
    (8, "the GPU stopped processing (a channel timed out)", "application", "restart-app"),
    (13, "graphics engine exception, usually an illegal access by the program", "application", "restart-app"),
    (
        31,
        "GPU memory page fault, usually an illegal memory access by the program",
        "application",
        "restart-app",
    ),
    (32, "invalid or corrupted push buffer stream (driver, PCIe or system memory)", "hardware", "reset-gpu"),
    (38, "driver firmware error", "driver", "reset-gpu"),
    (
        43,
        "the GPU stopped processing a faulting program; the GPU stays healthy",
        "application",
        "restart-app",
    ),
    (45, "preemptive cleanup after earlier errors or a killed program", "consequence", "see-earlier"),
    (48, "double-bit ECC error: the GPU's memory is failing", "hardware", "reset-gpu"),
    (61, "internal micro-controller breakpoint or warning (firmware)", "driver", "reset-gpu"),
    (62, "internal micro-controller halt (firmware, sometimes heat)", "driver", "reset-gpu"),
    (
        63,
        "ECC page retirement or row remapping recorded: the GPU must be reset to apply it",
        "hardware",
        "reset-gpu",
    ),
    (
        64,
        "ECC page retirement or row remapping failed: the GPU's memory cannot be repaired",
        "hardware",
        "contact-support",
    ),
    (68, "video processor (NVDEC) exception", "application", "restart-app"),
    (69, "graphics engine class error", "application", "restart-app"),
    (74, *_NVLINK),
    (
        79,
        "the GPU has fallen off the bus and no longer answers (PCIe, power or hardware fault)",
        "hardware",
        "reboot-node",
    ),
    (92, "high single-bit ECC error rate", "hardware", "contact-support"),
    (94, "contained ECC error: the program that touched the bad memory was stopped", "hardware", "reset-gpu"),
    (
        95,
        "uncontained ECC error: every program on the GPU is affected, the GPU needs a reset",
        "hardware",
        "reset-gpu",
    ),
    (109, "context switch timeout", "driver", "reset-gpu"),
    (119, "GSP firmware did not answer the driver (RPC timeout)", "driver", "reset-gpu"),
    (120, "GSP firmware error", "driver", "reset-gpu"),
    (121, "corrected error on the chip-to-chip (C2C) link", "hardware", "contact-support"),
    (123, "SPI flash or firmware-update error", "driver", "reset-gpu"),
    (140, "unrecovered ECC error", "hardware", "reset-gpu"),
    (143, "the GPU failed to initialize (GSP)", "driver", "reboot-node"),
    *((code, *_NVLINK) for code in range(144, 151)),
    (154, "the GPU needs a reset or the node a reboot to recover", "hardware", "reboot-node"),
)
"""The catalogue as rows: code, meaning, origin, action."""

XIDS: dict[int, Xid] = {row[0]: Xid(*row) for row in _TABLE}
"""The catalogue by code."""


def xid(code: int) -> Xid:
    """The catalogue's entry for ``code``; an unknown code reads as a driver-reported GPU error
    judged as hardware."""
    return XIDS.get(code) or Xid(code, "a GPU error reported by the driver", "hardware", "contact-support")


@dataclass(frozen=True)
class XidLine:
    """One Xid line of a kernel log: the GPU's PCI address, the code, the process, the cause
    named by a ``caused by previous Xid`` suffix."""

    pci: str
    code: int
    pid: int | None
    previous: int | None
    line: str

    @property
    def cause(self) -> Xid:
        """The Xid that explains this line: the earlier one when the driver names it."""
        return xid(self.previous if self.previous is not None else self.code)


_XID_LINE = re.compile(
    r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f:.]{1,20})\): (?P<code>\d{1,4})"
    r"(?:, pid=(?P<pid>\d{1,10}))?"
    r"(?:.{0,200}?caused by previous Xid (?P<previous>\d{1,4}))?"
)


def pci_slot(address: str) -> tuple[str, str] | None:
    """The bus and device of a PCI address, however it is written: the driver's ``0000:3b:00``
    and DCGM's ``00000000:3B:00.0`` are the same GPU, ``("3b", "00")``."""
    parts = address.strip().lower().split(":")
    if len(parts) < 2:
        return None
    return parts[-2].lstrip("0") or "0", parts[-1].split(".")[0]


def parse_xid_lines(text: str, most: int = 64) -> tuple[XidLine, ...]:
    """The Xid lines of ``text`` (a node's kernel log, an Event's message), at most ``most``."""
    found: list[XidLine] = []
    for line in text.splitlines()[:10_000]:
        match = _XID_LINE.search(line[:2_000])
        if match is None:
            continue
        pid, previous = match.group("pid"), match.group("previous")
        found.append(
            XidLine(
                pci=match.group("pci"),
                code=int(match.group("code")),
                pid=int(pid) if pid else None,
                previous=int(previous) if previous else None,
                line=line.strip()[:500],
            )
        )
        if len(found) >= most:
            break
    return tuple(found)
