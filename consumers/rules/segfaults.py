"""Rule ``segfault``: a process died of a segmentation fault (SIGSEGV) or a bus error (SIGBUS).

Read from the failed container's log tail — UCX's ``Caught signal 11 (Segmentation
fault: …)``, Open MPI's ``*** Process received signal *** / Signal: Segmentation fault
(11)``, Python's faulthandler (``Fatal Python error: Segmentation fault``), the shell's
``Segmentation fault (core dumped)``, mpirun's or Hydra's account of a rank that died of
signal 11 (or a runtime's walk-back: Cray's ``Process died with signal 11``, PALS, MPD, ALPS;
Hydra's ``BAD TERMINATION`` block by its ``EXIT CODE: 139`` or ``EXIT STRING: Segmentation fault``,
unless a communication failure printed before it is the first cause),
the kernel's ``segfault at … ip …``, a PyTorch DataLoader worker killed by SIGSEGV, the signal's
words alone on a line (MXNet's handler's ``Segmentation fault: 11`` before its ``[bt]`` frames, macOS's
shell) or bash's report of a script's command that died of it (``line 207: 10558 Segmentation fault``),
the Intel Fortran runtime's ``forrtl: severe (174): SIGSEGV`` (its traceback table's first named routine)
— or from the container's own exit code 139
(SIGSEGV) or 135 (SIGBUS). The sentence names the rank and, when a backtrace follows, the
function it crashed in. mpirun's abort summary that follows is this crash (the catalog lets
it explain ``mpi-abort``). A bus error while NCCL runs is NCCL's ``/dev/shm`` being too small
(``mpi-comm``).
"""

from __future__ import annotations

import re

from consumers.rules.facts import other_workers, pod_text, terminations
from consumers.rules.rule import Context, Detection, Rule, container_fact, log_facts
from consumers.rules.signatures import (
    Hit,
    crash_frame,
    crash_host,
    crash_is_bus_error,
    native_crashes,
    transport_failures,
)
from consumers.rules.state import PodState, RunState
from consumers.rules.tails import bounded, comm_failures, rank_failures
from consumers.rules.wording import also, host_label, rank_subject, who
from controller.contract.findings import Evidence

_SEGV_EXIT, _BUS_EXIT = 139, 135


def _crash_subject(state: RunState, pod: PodState, tail: tuple[str, ...], hits: tuple[Hit, ...]) -> str:
    """Who crashed: the worker, or the rank mpirun / Hydra says died of the signal, or the
    host the crash line names."""
    rank = next((h.rank for h in hits if h.rank is not None), None)
    if pod.role != "launcher" or rank is not None:
        return rank_subject(state, pod, rank)
    for failure in rank_failures(tail):
        if failure.how == "killed" and (failure.signal or "").split(" ")[0] in ("11", "7"):
            if failure.rank is not None and failure.host:
                return f"Rank {failure.rank} on {host_label(failure.host, state)}"
            if failure.rank is not None:
                return rank_subject(state, pod, failure.rank)
            if failure.host:
                return f"A rank on {host_label(failure.host, state)}"
    host = next((h for hit in hits if (h := crash_host(hit)) is not None), None)
    return f"A rank on {host_label(host, state)}" if host else "A rank"


def _after_a_comm_failure(tail: tuple[str, ...], hit: Hit) -> bool:
    """Whether ``hit`` is Hydra's exit code or exit string of a process (no signal named by Hydra
    itself) that a communication failure printed before it explains: the first cause is named, not
    the termination that followed it."""
    if hit.name != "hydra-signal" or "KILLED BY SIGNAL" in hit.line:
        return False
    raw = bounded(tail)
    return any(line in raw[: hit.index] for failure in comm_failures(tail) for line in failure.lines)


def _from_log(state: RunState, pod: PodState) -> tuple[str, tuple[Evidence, ...], str] | None:
    tail = pod_text(pod)
    hits = tuple(h for h in native_crashes(tail) if not _after_a_comm_failure(tail, h))
    if not hits:
        return None
    first = hits[0]
    bus = crash_is_bus_error(first)
    frame = next((f for h in hits if (f := crash_frame(tail, h.index)) is not None), None)
    what = "a bus error (SIGBUS)" if bus else "a segmentation fault (SIGSEGV)"
    where = f" in {frame}" if frame else ""
    if not frame and first.name == "dataloader":
        where = " in a PyTorch DataLoader worker process (rerun with num_workers=0 for its stack)"
    kind = "bus" if bus else "segv"
    if not frame and _by_mxnet(tail, first.index):
        where, kind = (
            " in MXNet's native library (libmxnet; its handler printed the [bt] frames after it)",
            "mxnet",
        )
    if first.name == "forrtl":
        where, kind = _in_fortran(tail, first.index), "fortran"
    if first.name == "r":
        where, kind = _in_r(tail, first.index), "r"
    if first.name == "julia":
        where, kind = _in_julia(tail, first.index), "julia"
    if first.name == "foam":
        where, kind = " in an OpenFOAM solver (its sigSegv handler printed the stack)", "foam"
    if first.name == "petsc":
        where, kind = " in a PETSc program (PETSc's signal handler caught it)", "petsc"
    if first.name == "sanitizer":
        where, kind = _by_sanitizer(tail, first), "sanitizer"
    if first.name in _LAUNCHED:
        task = f"task {first.group('task')} on {first.group('host')}" if first.group("task") else "a task"
        where = f"{where} ({first.signature.library} reported {task} ended by the signal)"
        kind = kind if bus else "launcher"
    if first.name == "dotnet-access-violation":
        where, kind = f"{where} in native code under the .NET runtime (AccessViolationException)", "dotnet"
    subject = _crash_subject(state, pod, tail, hits)
    sentence = f"{subject} crashed with {what}{where}"
    return sentence, log_facts(pod, dict.fromkeys(h.line for h in hits[:6])), kind


_FORTRAN_TABLE = re.compile(r"^\s{0,8}Image {2,30}PC {2,30}Routine {2,30}Line {2,30}Source\s{0,4}$")
_FORTRAN_ROW = re.compile(
    r"^\s{0,8}(?P<image>\S{1,200}) {1,30}[0-9A-Fa-f]{8,16} {1,30}(?P<routine>\S{1,200}) {1,30}"
    r"(?P<line>\d{1,7}|Unknown) {1,30}(?P<source>\S{1,200})\s{0,4}$"
)


def _in_fortran(tail: tuple[str, ...], index: int) -> str:
    """`` in a Fortran program (the Intel Fortran runtime's forrtl …)``: the first row of its traceback
    table under the error that names a routine says where, when the program was built with ``-traceback``."""
    after = bounded(tail)[index + 1 : index + 12]
    rows = [m for line in after if (m := _FORTRAN_ROW.match(line)) and not _FORTRAN_TABLE.match(line)]
    named = next((m for m in rows if m["routine"] != "Unknown"), None)
    if named is not None:
        at = f" at {named['source']}:{named['line']}" if named["line"] != "Unknown" else ""
        return f" in {named['routine']}{at} (the Intel Fortran runtime's forrtl severe error 174)"
    return " in a Fortran program (the Intel Fortran runtime's forrtl severe error 174; no routine named)"


_JULIA_AT = re.compile(
    r"in expression starting at (?P<file>\S{1,300}?):(?P<line>\d{1,7})\b"
    r"|while loading (?P<old>[^,\n]{1,300}), in expression starting on line (?P<oldline>\d{1,7})"
)


def _in_julia(tail: tuple[str, ...], index: int) -> str:
    """`` in Julia code at file.jl:N``: the top-level expression Julia's handler says it was running
    (``in expression starting at …`` under the signal, or its older ``while loading …`` line)."""
    for line in bounded(tail)[index : index + 40]:
        if (m := _JULIA_AT.search(line)) is not None:
            file, at = (m["file"], m["line"]) if m["file"] else (m["old"], m["oldline"])
            return f" in Julia code at {file}:{at} (Julia's signal handler; the expression it was running)"
    return " in a Julia program (Julia's signal handler caught it)"


_R_CAUSE = re.compile(
    r"^\s{0,8}address (?P<address>0x[0-9a-fA-F]{1,16}|\(nil\)), cause '(?P<cause>[^'\n]{1,80})'"
)


def _in_r(tail: tuple[str, ...], index: int) -> str:
    """`` in R's process …``: R's handler caught the signal; its next line says at what address and why."""
    cause = next((m for line in bounded(tail)[index + 1 : index + 3] if (m := _R_CAUSE.match(line))), None)
    said = f" at {cause['address']}: {cause['cause']}" if cause is not None else ""
    return f" in R's process (R's handler caught it{said}; a package's compiled code, as a rule)"


_SANITIZER_ACCESS = re.compile(r"The signal is caused by a (?P<access>READ|WRITE|UNKNOWN) memory access")
_SANITIZER_FRAME = re.compile(r"^\s{0,8}#0 0x[0-9a-fA-F]{1,16} in (?P<func>[^\s(]{1,200})")
_SANITIZER_ZERO_PAGE = re.compile(r"Hint: address points to the zero page")


def _by_sanitizer(tail: tuple[str, ...], hit: Hit) -> str:
    """`` (AddressSanitizer caught it …)``: the sanitizer's report under its ``SEGV on unknown address``
    line says the access, whether it was a null pointer's, and its ``#0`` frame where."""
    lines = bounded(tail)
    # its report's own sentences, which the readers take for prose, read as it printed them
    after = tail[len(tail) - len(lines) :][hit.index + 1 : hit.index + 12]
    access = next((m["access"].lower() for line in after if (m := _SANITIZER_ACCESS.search(line))), None)
    frame = next((m["func"] for line in after if (m := _SANITIZER_FRAME.match(line))), None)
    said = [f"a {access} memory access"] if access and access != "unknown" else []
    if any(_SANITIZER_ZERO_PAGE.search(line) for line in after):
        said.append("a null pointer's")
    if frame:
        said.append(f"in {frame}()")
    how = f": {', '.join(said)}" if said else ""
    if hit.group("overflow"):
        how = f": a stack overflow{', ' + ', '.join(said) if said else ''}"
    return f" ({hit.group('tool')} caught it{how}; its report's #0 frame is where)"


_MXNET_FRAME = re.compile(r"\[bt\] \(\d{1,3}\) [^\n]{0,300}?\blibmxnet\.(?:so|dylib)\b")
"""A frame of the stack MXNet's (dmlc-core's) signal handler prints: ``[bt] (0) …/libmxnet.so(+0x…)``."""


def _by_mxnet(tail: tuple[str, ...], index: int) -> bool:
    """Whether MXNet's handler reported the crash at line ``index``: its frames in libmxnet follow."""
    return any(_MXNET_FRAME.search(line) for line in bounded(tail)[index + 1 : index + 8])


def _from_exit(pod: PodState, ctx: Context) -> tuple[str, tuple[Evidence, ...], str] | None:
    for t in terminations(pod, ctx):
        if t.exit_code in (_SEGV_EXIT, _BUS_EXIT):
            bus = t.exit_code == _BUS_EXIT
            if bus and any(h.name == "nccl-shm-bus" for h in transport_failures(pod_text(pod))):
                return None
            what = "a bus error (SIGBUS" if bus else "a segmentation fault (SIGSEGV"
            fact = container_fact(pod, t.container, f"{t.field}.exitCode", t.exit_code)
            return (
                f"{who(pod)} crashed with {what}, exit code {t.exit_code})",
                (fact,),
                "bus" if bus else "segv",
            )
    return None


def _detect_segfault(state: RunState, ctx: Context) -> Detection | None:
    found: list[tuple[PodState, tuple[str, tuple[Evidence, ...], str]]] = []
    for pod in state.current_pods():
        crash = _from_log(state, pod) or _from_exit(pod, ctx)
        if crash is not None:
            found.append((pod, crash))
    if not found:
        return None
    found.sort(key=lambda item: item[0].role == "launcher")
    pod, (sentence, _, kind) = found[0]
    others = other_workers(found)
    return Detection(
        root_cause=sentence + also(others),
        evidence=tuple(e for _, (_, facts, _) in found for e in facts),
        key=(kind, *(p.uid for p, _ in found)),
        remediation={
            "bus": _BUS_STEPS,
            "mxnet": _MXNET_STEPS,
            "r": _R_STEPS,
            "sanitizer": _SANITIZER_STEPS,
            "fortran": _FORTRAN_STEPS,
            "julia": _JULIA_STEPS,
            "petsc": _PETSC_STEPS,
            "launcher": _LAUNCHER_STEPS,
            "dotnet": _DOTNET_STEPS,
            "foam": _FOAM_STEPS,
        }.get(kind),
    )


_SEGV_STEPS = (
    "Read the backtrace after the signal in the log: kubectl -n {namespace} logs <pod> --previous "
    "(set PYTHONFAULTHANDLER=1 for Python stacks; ulimit -c unlimited for a core dump).",
    "A crash inside MPI, UCX, NCCL or a compiled extension often means builds that do not belong "
    "together: check the CUDA, NCCL, MPI and framework versions of the image; for UCX try "
    "UCX_MEMTYPE_CACHE=n or another UCX_TLS.",
    "If it happens on one node only, suspect that node's hardware or driver: kubectl -n {namespace} "
    "get pods -o wide | grep {job}.",
)
_BUS_STEPS = (
    "A bus error usually means shared memory ran out: mount an emptyDir with medium: Memory at "
    "/dev/shm in the pod template (the container default is 64 MiB) and size the memory limit for it.",
    "Otherwise a memory-mapped file shrank or its disk filled up while in use: check the volumes.",
    *_SEGV_STEPS[:1],
)
_R_STEPS = (
    "Read R's traceback under the crash in the log (kubectl -n {namespace} logs <pod> --previous): its "
    "first frames name the package function whose compiled code (.Call / .C / Rcpp) crashed.",
    "Reinstall that package from source against this R and its system libraries (a binary built for "
    "another R or libc crashes this way), then run the script with R -d gdb or R -d valgrind to find "
    "the access.",
    *_SEGV_STEPS[2:],
)
_SANITIZER_STEPS = (
    "Read the sanitizer's report in the log (kubectl -n {namespace} logs <pod> --previous): its #0 frame is "
    "the access that crashed, 'The signal is caused by a READ / WRITE memory access' says which, and a "
    "zero-page address is a null pointer.",
    "Symbolize it if the frames are bare addresses (ASAN_SYMBOLIZER_PATH to llvm-symbolizer, "
    "ASAN_OPTIONS=symbolize=1:fast_unwind_on_fatal=0), and fix the access in that code; the image is a "
    "sanitizer build, so the same crash without it is the same bug.",
    *_SEGV_STEPS[2:],
)
_FORTRAN_STEPS = (
    "Intel Fortran's SIGSEGV is most often its stack overflowing with automatic and temporary arrays: "
    "raise the stack limit in the container's command (ulimit -s unlimited, and OMP_STACKSIZE for OpenMP "
    "threads) or rebuild with -heap-arrays.",
    "Rebuild with -g -traceback (and -check bounds to catch an out-of-range index) so the forrtl table's "
    "Image / PC / Routine / Line / Source rows name the routine and line instead of Unknown.",
    *_SEGV_STEPS[2:],
)
_JULIA_STEPS = (
    "Read Julia's backtrace under 'signal (11)' in the log (kubectl -n {namespace} logs <pod> --previous): "
    "its first frame in a native library (libmpi, libucs, a ccall'd .so) is where it crashed.",
    "Under MPI.jl a crash at MPI.Init or in the first MPI call is most often MPI.jl's binary not matching "
    "the MPI the job launches with: point MPIPreferences at the image's MPI "
    "(MPIPreferences.use_system_binary()) "
    'and rebuild the project; with UCX and Julia threads set UCX_ERROR_SIGNALS="" so UCX leaves Julia\'s '
    "own signals alone.",
    *_SEGV_STEPS[2:],
)
_PETSC_STEPS = (
    "Rerun with PETSc's own options to find the access: -on_error_attach_debugger or -start_in_debugger "
    "(noxterm in a container), or under valgrind with -malloc 0, as PETSc's message suggests.",
    "Build PETSc with --with-debugging=1 so its error stack names the function (the PETSC ERROR lines), "
    "and check that the program and PETSc were built against the same MPI and compiler.",
    *_SEGV_STEPS[2:],
)
_LAUNCHED = frozenset({"srun-signal", "flux-signal"})
"""A launcher's own line on a task a signal ended (srun's, flux-job's): it names the task, not the code."""
_LAUNCHER_STEPS = (
    "The launcher only saw the task end: read the task's own output above its line for the backtrace "
    "(kubectl -n {namespace} logs <pod> --previous), or get a core: ulimit -c unlimited in the batch "
    "script (srun --core-file / Flux's job shell passes the limit on to its tasks).",
    "Rerun the failing task alone under gdb (srun --pty -n1 gdb --args …, flux run -n1 gdb --args …) to see "
    "the frame that crashed.",
    *_SEGV_STEPS[1:],
)
_DOTNET_STEPS = (
    "The .NET runtime ended the process for an access violation in native code (a P/Invoke, a native "
    "library it loads): the stack after AccessViolationException names the managed call into it.",
    "Check that the native library matches the image's architecture and C library, and collect a dump "
    "(DOTNET_DbgEnableMiniDump=1) to open with dotnet-dump analyze.",
    *_SEGV_STEPS[2:],
)
_FOAM_STEPS = (
    "Read the frames after Foam::sigSegv::sigHandler in the log: the first one of the solver or its "
    "libraries is where it crashed (build with WM_COMPILE_OPTION=Debug for file and line, or run the case "
    "with -debug-switch / under gdb on one processor).",
    "A crash right after a mesh or field change is often a case the solver cannot read: run checkMesh, "
    "and check a custom library (libs (...) in system/controlDict) was built against the same OpenFOAM.",
    *_SEGV_STEPS[2:],
)
_MXNET_STEPS = (
    "Read MXNet's [bt] frames in the log: the first one after the C library's signal frame is where it "
    "crashed (kubectl -n {namespace} logs <pod> --previous).",
    "Run the operators one at a time to find the one that crashes: MXNET_ENGINE_TYPE=NaiveEngine in the "
    "container's environment (MXNet's synchronous engine).",
    "A crash in libmxnet often means builds that do not belong together: the mxnet wheel's CUDA and "
    "cuDNN against the image's, and any compiled extension built against another MXNet or compiler.",
)

SEGFAULT = Rule(
    id="segfault",
    kind="cause",
    severity="critical",
    summary="A process crashed with a segmentation fault (SIGSEGV) or a bus error (SIGBUS) in native code.",
    remediation=_SEGV_STEPS,
    detect=_detect_segfault,
)
