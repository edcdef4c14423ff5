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
from typing import Literal, cast, get_args

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

_TABLE = """
code     origin       action           NVIDIA's meaning in plain words
      8  application  restart-app      the GPU stopped processing (a channel timed out)
     13  application  restart-app      graphics engine exception, usually an illegal access by the program
     31  application  restart-app      GPU memory page fault, usually an illegal memory access by the program
     32  hardware     reset-gpu        invalid or corrupted push buffer stream (driver, PCIe or system memory)
     38  driver       reset-gpu        driver firmware error
     43  application  restart-app      the GPU stopped processing a faulting program; the GPU stays healthy
     45  consequence  see-earlier      preemptive cleanup after earlier errors or a killed program
     48  hardware     reset-gpu        double-bit ECC error: the GPU's memory is failing
     61  driver       reset-gpu        internal micro-controller breakpoint or warning (firmware)
     62  driver       reset-gpu        internal micro-controller halt (firmware, sometimes heat)
     63  hardware     reset-gpu        ECC page retirement or row remapping recorded: the GPU must be reset to apply it
     64  hardware     contact-support  ECC page retirement or row remapping failed: the GPU's memory cannot be repaired
     68  application  restart-app      video processor (NVDEC) exception
     69  application  restart-app      graphics engine class error
     74  hardware     reset-gpu        NVLink error: a link between GPUs failed
     79  hardware     reboot-node      the GPU has fallen off the bus and no longer answers (PCIe, power or hardware fault)
     92  hardware     contact-support  high single-bit ECC error rate
     94  hardware     reset-gpu        contained ECC error: the program that touched the bad memory was stopped
     95  hardware     reset-gpu        uncontained ECC error: every program on the GPU is affected, the GPU needs a reset
    109  driver       reset-gpu        context switch timeout
    119  driver       reset-gpu        GSP firmware did not answer the driver (RPC timeout)
    120  driver       reset-gpu        GSP firmware error
    121  hardware     contact-support  corrected error on the chip-to-chip (C2C) link
    123  driver       reset-gpu        SPI flash or firmware-update error
    140  hardware     reset-gpu        unrecovered ECC error
    143  driver       reboot-node      the GPU failed to initialize (GSP)
144-150  hardware     reset-gpu        NVLink error: a link between GPUs failed
    154  hardware     reboot-node      the GPU needs a reset or the node a reboot to recover
"""  # noqa: E501 (a row a line)
"""The catalogue as a table: the code (or a range of codes), the origin, the action (NVIDIA's
resolution bucket) and the meaning, in columns."""


def _rows(table: str) -> dict[int, Xid]:
    """The Xids of ``table``'s rows, by code; an origin or an action not in the vocabulary fails."""
    found: dict[int, Xid] = {}
    for row in table.strip().splitlines()[1:]:
        codes, origin, action, meaning = row.split(maxsplit=3)
        if origin not in get_args(Origin) or action not in get_args(Action):
            raise ValueError(f"Xid row with an unknown origin or action: {row!r}")
        first, _, last = codes.partition("-")
        for code in range(int(first), int(last or first) + 1):
            found[code] = Xid(code, meaning, cast(Origin, origin), cast(Action, action))
    return found


XIDS: dict[int, Xid] = _rows(_TABLE)
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


# (older drivers print the address without ``PCI:``: ``NVRM: Xid (0000:01:00): 13, 0005 …``)
_XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]{1,20})\): (?P<code>\d{1,4})"
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
