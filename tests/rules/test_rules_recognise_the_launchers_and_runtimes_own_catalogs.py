"""The failures the launchers, schedulers, runtimes and frameworks print, read from their own catalogs.

The second catalog pass of issue 35, on the sources the first (the libraries' own message catalogs: CUDA,
NCCL, MPI, UCX, the kernel, the C library) did not cover: the job launchers and schedulers reporting a
rank's or a task's end (Slurm, PBS, LSF, Grid Engine, Flux, Cray ALPS / PALS, IBM's jsrun, Intel MPI's and
MPICH's Hydra banners, Open MPI's ``mpirun noticed`` for each signal as the rules decide it), the runtimes'
signal and allocation handlers (OpenFOAM, the Fortran runtimes, Julia, R, the JVM, .NET, Node, Python's
faulthandler, NumPy), the distributed frameworks beyond MPI and NCCL (Ray, Dask, Spark on YARN and on
Kubernetes, ps-lite, PaddlePaddle, oneCCL, torch_npu, the TPU runtime, the DeepSpeed / Accelerate
launchers, Lightning), the storage libraries (SQLite, HDF5) and the container runtimes' pulls, and
Kubernetes as kubectl prints it and a managed cluster's events word it. Each table is one source, named by
the file in its repository that formats the message; a row is the message as printed, the rule its failure
belongs to, what the finding says and a step of its remediation (the library's own where the rules know
it). The near-misses come from the same sources: INFO lines, a limit reached that the run went on after,
advice naming a failure, a listing of pods that ended well.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, catalog_rows, fires_saying, stays_quiet

# name: (rule, (text, what the root cause says, what a step of the remediation says, the replay's stack))

# Slurm src/slurmd/slurmstepd/ (the step daemon's error() lines: the cgroup plugin's OOM count in
# src/plugins/task/cgroup/, the accounting poll's kill in src/common/slurm_jobacct_gather.c) and srun's task
# report (src/srun/srun_job.c), strsignal()'s words
_SLURM: dict[str, tuple[RuleId, Wording]] = {
    "slurm-oom-event": (
        "oom",
        (
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1042215.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    "slurm-oom-event-old": (
        "oom",
        (
            "slurmstepd: error: Detected 2 oom-kill event(s) in step 14037828.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    "slurm-srun-task-oom": (
        "oom",
        (
            "srun: error: gpu-node-1: task 13: Out Of Memory",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    "slurm-killed-oom": (
        "oom",
        (
            "srun: error: gpu-node-1: task 3: Killed\nslurmstepd: error: Detected 1 oom-kill event(s) in StepId=4711.0. Some of your processes may have been killed by the cgroup out-of-memory handler.",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    "slurm-exceeded-mem": (
        "oom",
        (
            "slurmstepd: error: Job 4711 exceeded memory limit (33554432 > 33554432), being killed",
            "failed: out of memory — Slurm's accounting killed the job",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
    "slurm-exceeded-step-mem": (
        "oom",
        (
            "slurmstepd: error: Step 4711.0 exceeded memory limit (16777216 > 16384000), being killed",
            "failed: out of memory — Slurm's accounting killed the job",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
    "slurm-vmem": (
        "oom",
        (
            "slurmstepd: error: StepId=4711.0 exceeded virtual memory limit (68719476736 > 34359738368), being killed",
            "failed: out of memory — Slurm's accounting killed the job",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
    "slurm-sacct-oom": (
        "oom",
        (
            "4711.0           python OUT_OF_ME+    0:125 ",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    "slurm-srun-segv": (
        "segfault",
        (
            "srun: error: gpu-node-1: task 3: Segmentation fault (core dumped)",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
    "slurm-srun-segv-nocore": (
        "segfault",
        (
            "srun: error: gpu-node-1: task 3: Segmentation fault",
            "crashed with a segmentation fault (SIGSEGV) (Slurm's srun",
            "The launcher only saw the task end: read the",
            "other",
        ),
    ),
    "slurm-srun-bus": (
        "segfault",
        (
            "srun: error: gpu-node-1: task 3: Bus error",
            "crashed with a bus error (SIGBUS) (Slurm's srun reported",
            "A bus error usually means shared memory ran",
            "other",
        ),
    ),
    "slurm-srun-abort": (
        "mpi-abort",
        (
            "srun: error: gpu-node-1: tasks 0-3: Aborted (core dumped)",
            "aborted: srun reported task 0 Aborted (SIGABRT)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
    "slurm-pmi-abort": (
        "mpi-abort",
        (
            "srun: error: gpu-node-1: task 2: Exited with exit code 1\nsrun: Terminating StepId=4711.0\nslurmstepd: error: *** STEP 4711.0 ON gpu-node-1 CANCELLED AT 2026-11-29T08:01:02 ***\nApplication 4711 task 2 called MPI_Abort(MPI_COMM_WORLD, 1)",
            "exited with code 1",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
    "slurm-pmi2-abort": (
        "mpi-abort",
        (
            "application called MPI_Abort(MPI_COMM_WORLD, 1) - process 2\nsrun: error: gpu-node-1: task 2: Exited with exit code 1",
            "aborted (exit 1)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
    "slurm-disk-write": (
        "disk-full",
        (
            "slurmstepd: error: Could not open stdout file /scratch/team/out-4711.log: No space left on device",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
}

# PBS Pro and TORQUE's MOM (src/resmom/mom_main.c, the job's resource limits checked against its use: ``=>>
# PBS: job killed: …``)
_PBS: dict[str, tuple[RuleId, Wording]] = {
    "pbs-mem": (
        "oom",
        (
            "=>> PBS: job killed: mem 33554432kb exceeded limit 16777216kb",
            "failed: out of memory — PBS killed the job for using more",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
    "pbs-vmem": (
        "oom",
        (
            "=>> PBS: job killed: vmem 68719476736b exceeded limit 34359738368b",
            "failed: out of memory — PBS killed the job for using more",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
    "pbs-pro-mem": (
        "oom",
        (
            "PBS: job killed: mem job total 4323312 kb exceeded limit 3145728 kb",
            "failed: out of memory — PBS killed the job for using more",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
}

# IBM Spectrum LSF's job report (its exit reasons, lsbatch.h's TERM_* table, and the 'Exited with exit code'
# line of the job's output mail)
_LSF: dict[str, tuple[RuleId, Wording]] = {
    "lsf-memlimit": (
        "oom",
        (
            "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.\nExited with exit code 137.",
            "failed: out of memory — LSF killed the job for using more",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
    "lsf-swaplimit": (
        "oom",
        (
            "TERM_SWAP: job killed after reaching LSF swap usage limit.\nExited with exit code 137.",
            "failed: out of memory — LSF killed the job for using more",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
}

# Grid Engine's execd (source/daemons/execd/ptf.c / execd_ck_to_do.c: a job over its h_vmem)
_GRID_ENGINE: dict[str, tuple[RuleId, Wording]] = {
    "sge-h_vmem": (
        "oom",
        (
            'job 4711.1 exceeds job hard limit "h_vmem" of queue "gpu.q@gpu-node-1" (36045729792.00000 > limit:34359738368.00000) - sending SIGKILL',
            "failed: out of memory — Grid Engine killed the job for using",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
}

# Flux's job shell (src/shell/oom.c) and flux-job (src/cmd/job/attach.c: ``task(s) %s`` with strsignal())
_FLUX: dict[str, tuple[RuleId, Wording]] = {
    "flux-oom": (
        "oom",
        (
            "flux-job: task(s) exited with exit code 137\nflux-shell[0]: ERROR: oom: Memory cgroup out of memory: killed 1 task on gpu-node-1.",
            "failed: out of memory — Flux's job shell (its oom plugin on",
            "Ask the batch scheduler for more memory for",
            "other",
        ),
    ),
    "flux-segv": (
        "segfault",
        (
            "flux-job: task(s) Segmentation fault",
            "crashed with a segmentation fault (SIGSEGV) (Flux's flux-job",
            "The launcher only saw the task end: read the",
            "other",
        ),
    ),
    "flux-shell-segv": (
        "segfault",
        (
            "flux-shell[1]: FATAL: task 3: Segmentation fault (core dumped)",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
}

# Cray ALPS (aprun and apsys: the node's OOM kill, _pmiu_daemon's PE RANK report) and HPE PALS (palsd:
# ``rank N died from signal S``)
_CRAY: dict[str, tuple[RuleId, Wording]] = {
    "aprun-oom": (
        "oom",
        (
            "[NID 00012] 2026-11-29 08:01:02 Apid 4711: OOM killer terminated this process.\nApplication 4711 exit signals: Killed",
            "the kernel's OOM killer (as Cray ALPS reported it) killed a rank",
            "ALPS placed more memory on the compute node",
            "other",
        ),
    ),
    "aprun-segv": (
        "segfault",
        (
            "_pmiu_daemon(SIGCHLD): [NID 00012] [c0-0c0s3n0] [Sun Nov 29 08:01:02 2026] PE RANK 3 exit signal Segmentation fault",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
    "pals-segv": (
        "segfault",
        (
            "x1000c0s0b0n0.hsn.cm.polaris.alcf.anl.gov: rank 3 died from signal 11 and dumped core",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
    "pals-abort": (
        "mpi-abort",
        (
            "x1000c0s0b0n0: rank 3 exited with code 1\nMPICH ERROR [Rank 3] [job id 4711] [Sun Nov 29 08:01:02 2026] [x1000c0s0b0n0] - Abort(1) (rank 3 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3",
            "aborted (exit 1)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
    "pals-oom": (
        "oom",
        (
            "x1000c0s0b0n0: rank 3 died from signal 9\nx1000c0s0b0n0 kernel: Out of memory: Killed process 4711 (python) total-vm:98765432kB, anon-rss:87654321kB",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
}

# IBM Spectrum MPI under jsrun (its Open MPI base's signal handler, opal/util/stacktrace.c)
_JSM: dict[str, tuple[RuleId, Wording]] = {
    "jsrun-segv": (
        "segfault",
        (
            "Error: Remote JSM server is not responding on host gpu-node-1\nJob 4711: rank 3 exited with signal 11 (Segmentation fault)",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
    "jsrun-task-segv": (
        "segfault",
        (
            "[gpu-node-1:4711] *** Process received signal ***\n[gpu-node-1:4711] Signal: Segmentation fault (11)\n[gpu-node-1:4711] Signal code: Address not mapped (1)",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
}

# Intel MPI's mpiexec.hydra (its Hydra's BAD TERMINATION banner, pm/pmiserv/pmiserv_cb.c)
_INTEL_MPI: dict[str, tuple[RuleId, Wording]] = {
    "impi-hydra-segv": (
        "segfault",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 3 PID 4711 RUNNING AT gpu-node-1\n=   KILLED BY SIGNAL: 11 (Segmentation fault)\n===================================================================================",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "intel-mpi",
        ),
    ),
    "impi-hydra-oom": (
        "oom",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 3 PID 4711 RUNNING AT gpu-node-1\n=   KILLED BY SIGNAL: 9 (Killed)\n===================================================================================\nOut of memory: Killed process 4711 (python)",
            "failed: out of memory — node cpu-node-0 ran out of memory",
            "Raise the memory limit of the role that",
            "intel-mpi",
        ),
    ),
    "impi-hydra-exit": (
        "mpi-abort",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 3 PID 4711 RUNNING AT gpu-node-1\n=   EXIT STATUS: 1\n===================================================================================",
            "exited with code 1",
            "Read the failing rank's own error above the",
            "intel-mpi",
        ),
    ),
    "impi-killed-7": (
        "segfault",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 3 PID 4711 RUNNING AT gpu-node-1\n=   KILLED BY SIGNAL: 7 (Bus error)\n===================================================================================",
            "crashed with a bus error (SIGBUS)",
            "A bus error usually means shared memory ran",
            "intel-mpi",
        ),
    ),
}

# MPICH's Hydra (src/pm/hydra/pm/pmiserv/pmiserv_cb.c): the BAD TERMINATION banner in each release's words,
# KILLED BY SIGNAL or EXIT CODE with the EXIT STRING
_MPICH_BANNER: dict[str, tuple[RuleId, Wording]] = {
    "mpich-bad-term-exit-code": (
        "mpi-abort",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 4711 RUNNING AT gpu-node-1\n=   EXIT CODE: 134\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n===================================================================================\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Aborted (signal 6)",
            "was killed by signal 6 (SIGABRT)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
    "mpich-bad-term-bus": (
        "segfault",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 4711 RUNNING AT gpu-node-1\n=   EXIT CODE: 135\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n===================================================================================\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Bus error (signal 7)",
            "crashed with a bus error (SIGBUS)",
            "A bus error usually means shared memory ran",
            "mpich",
        ),
    ),
    "mpich-bad-term-segv-139": (
        "segfault",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 4711 RUNNING AT gpu-node-1\n=   EXIT CODE: 139\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n===================================================================================\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "mpich",
        ),
    ),
    "mpich-killed-9": (
        "mpi-abort",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 3 PID 4711 RUNNING AT gpu-node-1\n=   KILLED BY SIGNAL: 9 (Killed)\n===================================================================================",
            "was killed by signal 9 (Killed)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
    "mpich-killed-6": (
        "mpi-abort",
        (
            "===================================================================================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 3 PID 4711 RUNNING AT gpu-node-1\n=   KILLED BY SIGNAL: 6 (Aborted)\n===================================================================================",
            "was killed by signal 6 (Aborted)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
}

# Open MPI's and PRRTE's help texts on a process's end (orte/mca/errmgr/help-errmgr-base.txt, prrte's
# help-prterun.txt: ``mpirun noticed that process rank N … exited on signal S``), each signal as the rules
# decide it: 11 and 7 segfault, 9 with the kernel's OOM kill oom, the rest (6, 4, 8, 9 alone, 15) the abort
# of a rank
_OPEN_MPI_NOTICED: dict[str, tuple[RuleId, Wording]] = {
    "ompi-noticed-11": (
        "segfault",
        (
            "--------------------------------------------------------------------------\nmpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 11 (Segmentation fault).\n--------------------------------------------------------------------------",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "openmpi",
        ),
    ),
    "ompi-noticed-7": (
        "segfault",
        (
            "mpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 7 (Bus error).",
            "crashed with a bus error (SIGBUS)",
            "A bus error usually means shared memory ran",
            "openmpi",
        ),
    ),
    "ompi-noticed-6": (
        "mpi-abort",
        (
            "mpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 6 (Aborted).",
            "was killed by signal 6 (Aborted)",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "ompi-noticed-8": (
        "mpi-abort",
        (
            "mpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 8 (Floating point exception).",
            "was killed by signal 8 (Floating point exception)",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "ompi-noticed-4": (
        "mpi-abort",
        (
            "mpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 4 (Illegal instruction).",
            "was killed by signal 4 (Illegal instruction)",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "ompi-noticed-15": (
        "mpi-abort",
        (
            "mpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 15 (Terminated).",
            "was killed by signal 15 (Terminated)",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "ompi-noticed-9-bare": (
        "mpi-abort",
        (
            "mpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 9 (Killed).",
            "was killed by signal 9 (Killed)",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "ompi-noticed-9-oom": (
        "oom",
        (
            "mpirun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 9 (Killed).\nOut of memory: Killed process 4711 (python) total-vm:98765432kB, anon-rss:87654321kB",
            "failed: out of memory — node cpu-node-0 ran out of memory",
            "Raise the memory limit of the role that",
            "openmpi",
        ),
    ),
    "ompi-prte-noticed-11": (
        "segfault",
        (
            "prterun noticed that process rank 3 with PID 4711 on node gpu-node-1 exited on signal 11 (Segmentation fault).",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "openmpi",
        ),
    ),
    "ompi-exiting-improperly": (
        "mpi-abort",
        (
            "--------------------------------------------------------------------------\nmpirun has exited due to process rank 3 with PID 4711 on\nnode gpu-node-1 exiting improperly. There are three reasons this could occur:\n--------------------------------------------------------------------------",
            "exited improperly (without MPI_Finalize, or by an abort",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "ompi-primary-job": (
        "mpi-abort",
        (
            "Primary job  terminated normally, but 1 process returned\na non-zero exit code. Per user-direction, the job has been aborted.\n-------------------------------------------------------\n--------------------------------------------------------------------------\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first process to do so was:\n\n  Process name: [[4711,1],3]\n  Exit code:    1\n--------------------------------------------------------------------------",
            "exited with code 1",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
}

# OpenFOAM src/OSspecific/POSIX/signals/sigSegv.C (its handler calls error::printStack)
_OPENFOAM: dict[str, tuple[RuleId, Wording]] = {
    "openfoam-sigsegv": (
        "segfault",
        (
            "#0  Foam::error::printStack(Foam::Ostream&) at ??:?\n#1  Foam::sigSegv::sigHandler(int) at ??:?\n#2  ? in /lib/x86_64-linux-gnu/libc.so.6\n#3  Foam::fvMatrix<double>::solve() at ??:?",
            "crashed with a segmentation fault (SIGSEGV) in an OpenFOAM",
            "Read the frames after Foam::sigSegv::sigHandler",
            "other",
        ),
    ),
}

# the Intel Fortran runtime's forrtl messages (its severe errors 174, 41, 38) and libgfortran
# (runtime/error.c, runtime/memory.c, the backtrace of its signal handler)
_FORTRAN: dict[str, tuple[RuleId, Wording]] = {
    "forrtl-segv": (
        "segfault",
        (
            "forrtl: severe (174): SIGSEGV, segmentation fault occurred\nImage              PC                Routine            Line        Source\nsolver             0000000000412345  Unknown               Unknown  Unknown",
            "crashed with a segmentation fault (SIGSEGV) in a Fortran",
            "Intel Fortran's SIGSEGV is most often its",
            "other",
        ),
    ),
    "forrtl-nomem": (
        "oom",
        (
            "forrtl: severe (41): insufficient virtual memory",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    "forrtl-nospace": (
        "disk-full",
        (
            "forrtl: No space left on device\nforrtl: severe (38): error during write, unit 10, file /scratch/run/out.dat",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
    "forrtl-quota": (
        "disk-full",
        (
            "forrtl: Disk quota exceeded\nforrtl: severe (38): error during write, unit 12, file /home/team/run/restart.dat",
            "failed: disk quota exceeded",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
    "gfortran-segv": (
        "segfault",
        (
            "Program received signal SIGSEGV: Segmentation fault - invalid memory reference.\n\nBacktrace for this error:\n#0  0x7f1e2a in ???\n#1  0x401234 in solve_ at solver.f90:88",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
    "gfortran-alloc": (
        "oom",
        (
            "Operating system error: Cannot allocate memory\nAllocation would exceed memory limit\nError termination. Backtrace:",
            "failed: out of memory — an ALLOCATE of the Fortran program",
            "An ALLOCATE asked for more memory than the",
            "other",
        ),
    ),
    "gfortran-nospace": (
        "disk-full",
        (
            "At line 120 of file output.f90 (unit = 10, file = 'fort.10')\nFortran runtime error: No space left on device",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
}

# Julia src/signals-unix.c (``signal (11): Segmentation fault``) and src/gc.c (jl_memory_exception:
# OutOfMemoryError())
_JULIA: dict[str, tuple[RuleId, Wording]] = {
    "julia-segv": (
        "segfault",
        (
            "signal (11): Segmentation fault\nin expression starting at /workspace/train.jl:42\njl_gc_alloc at /buildworker/src/gc.c:1241",
            "crashed with a segmentation fault (SIGSEGV) in Julia code at",
            "Read Julia's backtrace under 'signal (11)' in",
            "other",
        ),
    ),
    "julia-oom": (
        "oom",
        (
            "ERROR: LoadError: OutOfMemoryError()\nStacktrace:\n [1] Array at ./boot.jl:448",
            "failed: out of memory — Julia could not allocate memory for",
            "Julia's allocator could not get memory for an",
            "other",
        ),
    ),
}

# R src/main/main.c (its sigactionSegv: ``*** caught segfault ***``) and src/main/memory.c (``cannot
# allocate vector of size``)
_R: dict[str, tuple[RuleId, Wording]] = {
    "r-segv": (
        "segfault",
        (
            " *** caught segfault ***\naddress 0x7f1e2a000000, cause 'memory not mapped'\n\nTraceback:\n 1: .Call(C_train, x)",
            "crashed with a segmentation fault (SIGSEGV) in R's process (",
            "Read R's traceback under the crash in the log",
            "other",
        ),
    ),
    "r-bus": (
        "segfault",
        (
            " *** caught bus error ***\naddress 0x7f1e2a000000, cause 'non-existent physical address'",
            "crashed with a bus error (SIGBUS) in R's process (R's",
            "Read R's traceback under the crash in the log",
            "other",
        ),
    ),
    "r-alloc": (
        "oom",
        (
            "Error: cannot allocate vector of size 12.5 Gb\nExecution halted",
            "failed: out of memory — R could not allocate a vector",
            "R could not allocate the vector it names (its",
            "other",
        ),
    ),
}

# HotSpot src/hotspot/share/utilities/vmError.cpp (hs_err's head) and the OutOfMemoryError details of its
# heap, metaspace and java.nio.Bits
_JVM: dict[str, tuple[RuleId, Wording]] = {
    "java-hserr": (
        "segfault",
        (
            "#\n# A fatal error has been detected by the Java Runtime Environment:\n#\n#  SIGSEGV (0xb) at pc=0x00007f1e2a3b4c5d, pid=4711, tid=4712\n#\n# JRE version: OpenJDK Runtime Environment (17.0.9+9)",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
    "java-native-oom": (
        "oom",
        (
            "#\n# There is insufficient memory for the Java Runtime Environment to continue.\n# Native memory allocation (mmap) failed to map 2147483648 bytes for committing reserved memory.",
            "failed: out of memory — the JVM could not get native memory",
            "The JVM asked the OS for native memory (its",
            "other",
        ),
    ),
    "java-gc-overhead": (
        "oom",
        (
            'Exception in thread "main" java.lang.OutOfMemoryError: GC overhead limit exceeded',
            "failed: out of memory — the JVM's heap was used up",
            "The JVM's heap (-Xmx) is smaller than the",
            "other",
        ),
    ),
    "jvm-direct": (
        "oom",
        (
            "java.lang.OutOfMemoryError: Direct buffer memory",
            "failed: out of memory — the JVM used up the memory it keeps",
            "The JVM ran out of the memory it keeps off",
            "other",
        ),
    ),
    "jvm-metaspace": (
        "oom",
        (
            "java.lang.OutOfMemoryError: Metaspace",
            "failed: out of memory — the JVM used up the memory it keeps",
            "The JVM ran out of the memory it keeps off",
            "other",
        ),
    ),
}

# .NET runtime src/coreclr/vm/excep.cpp / eepolicy.cpp (an unhandled exception's ``Unhandled exception.`` /
# ``Fatal error.``)
_DOTNET: dict[str, tuple[RuleId, Wording]] = {
    "dotnet-oom": (
        "oom",
        (
            "Unhandled exception. System.OutOfMemoryException: Exception of type 'System.OutOfMemoryException' was thrown.",
            "failed: out of memory — the .NET runtime could not allocate",
            "The .NET runtime could not allocate: give the",
            "other",
        ),
    ),
    "dotnet-segv": (
        "segfault",
        (
            "Fatal error. System.AccessViolationException: Attempted to read or write protected memory. This is often an indication that other memory is corrupt.",
            "crashed with a segmentation fault (SIGSEGV) in native code",
            "The .NET runtime ended the process for an",
            "other",
        ),
    ),
    "dotnet-nospace": (
        "disk-full",
        (
            "Unhandled exception. System.IO.IOException: No space left on device : '/data/ckpt/model.bin'",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
}

# Node.js src/node_errors.cc (OOMErrorHandler: ``FATAL ERROR: … JavaScript heap out of memory``) and
# lib/internal/errors.js (its ENOSPC)
_NODE: dict[str, tuple[RuleId, Wording]] = {
    "node-heap": (
        "oom",
        (
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n 1: 0xb7b3e0 node::Abort() [node]",
            "failed: out of memory — Node's V8 heap reached its limit",
            "Node's heap is capped below the container's",
            "other",
        ),
    ),
    "node-heap-old": (
        "oom",
        (
            "FATAL ERROR: CALL_AND_RETRY_LAST Allocation failed - JavaScript heap out of memory",
            "failed: out of memory — Node's V8 heap reached its limit",
            "Node's heap is capped below the container's",
            "other",
        ),
    ),
    "node-enospc": (
        "disk-full",
        (
            "Error: ENOSPC: no space left on device, write\n    at Object.writeSync (node:fs:927:3) {\n  errno: -28,\n  syscall: 'write',\n  code: 'ENOSPC'\n}",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
}

# CPython Modules/faulthandler.c (``Fatal Python error: <signal>``) and NumPy numpy/core/_exceptions.py
# (_ArrayMemoryError)
_PYTHON: dict[str, tuple[RuleId, Wording]] = {
    "faulthandler-segv": (
        "segfault",
        (
            'Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f1e2a3b4740 (most recent call first):\n  File "/workspace/train.py", line 42 in forward',
            "crashed with a segmentation fault (SIGSEGV) in forward",
            "Read the backtrace after the signal in the",
            "pytorch",
        ),
    ),
    "faulthandler-bus": (
        "segfault",
        (
            'Fatal Python error: Bus error\n\nThread 0x00007f1e2a3b4740 (most recent call first):\n  File "/workspace/data.py", line 88 in __getitem__',
            "crashed with a bus error (SIGBUS) in __getitem__ (/workspace",
            "A bus error usually means shared memory ran",
            "pytorch",
        ),
    ),
    "faulthandler-abort": (
        "mpi-abort",
        (
            'Fatal Python error: Aborted\n\nCurrent thread 0x00007f1e2a3b4740 (most recent call first):\n  File "/usr/lib/python3/dist-packages/mpi4py/__init__.py", line 1 in Abort\napplication called MPI_Abort(MPI_COMM_WORLD, 1) - process 0',
            "aborted (exit 1)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
    "python-memoryerror": (
        "oom",
        (
            'Traceback (most recent call last):\n  File "/workspace/train.py", line 42, in <module>\n    buf = np.empty((1 << 40,), dtype=np.float32)\nnumpy.core._exceptions._ArrayMemoryError: Unable to allocate 4.00 TiB for an array with shape (1099511627776,) and data type float32',
            "failed: out of memory — NumPy could not allocate an array",
            "NumPy could not allocate the array it names (",
            "pytorch",
        ),
    ),
}

# Ray src/ray/raylet/node_manager.cc and worker_killing_policy (the memory monitor's kill),
# python/ray/exceptions.py (OutOfMemoryError, ActorDiedError, NodeDiedError, OutOfDiskError)
_RAY: dict[str, tuple[RuleId, Wording]] = {
    "ray-oom": (
        "oom",
        (
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\nMemory on the node (IP: 10.0.62.231, ID: e5d953ef03e5) where the task (task ID: 43534, name=train_step, pid=4711, memory used=24.44GB) was running was 29.73GB / 31.13GB (0.955121), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 6f2ec5c8b0d5) because it was the most recently scheduled task.",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Ray's memory monitor (in each node's raylet)",
            "other",
        ),
    ),
    "ray-actor-oom": (
        "oom",
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: TrainWorker\n\tactor_id: 4f48435abed4c32e8891fa7f0d000000\n\tpid: 4711\nexit_type = NODE_OUT_OF_MEMORY,\nexit_detail = Task was killed due to the node running low on memory.",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Ray's memory monitor (in each node's raylet)",
            "other",
        ),
    ),
    "ray-worker-crashed-oom": (
        "oom",
        (
            "(raylet) [2026-11-29 08:01:02,123 E 4711 4711] (raylet) node_manager.cc:3007: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 71e7878eb13c, IP: 10.15.3.158) over the last time period.",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Ray's memory monitor (in each node's raylet)",
            "other",
        ),
    ),
    "ray-nodedied": (
        "oom",
        (
            "ray.exceptions.NodeDiedError: Task failed because the node died. Node 71e7878eb13c, IP 10.15.3.158 was killed.\n(raylet) node_manager.cc:3007: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 71e7878eb13c, IP: 10.15.3.158) over the last time period.",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Ray's memory monitor (in each node's raylet)",
            "other",
        ),
    ),
    "ray-actor-segv": (
        "segfault",
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: TrainWorker\nThe actor's worker process died with a fatal signal: SIGSEGV (Segmentation fault)\n*** SIGSEGV received at time=1732867262 on cpu 3 ***",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "other",
        ),
    ),
    "ray-object-store-full": (
        "disk-full",
        (
            "ray.exceptions.OutOfDiskError: Local disk is full\nThe object cannot be created because the local disk's utilization exceeds the predefined threshold (0.95).",
            "failed: Ray's object store could not spill to its node's",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
    "ray-actor-died": (
        "mpi-abort",
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: TrainWorker\nThe actor is dead because its node has died. Node Id: 71e7878eb13c",
            "Ray's TrainWorker actor died unexpectedly",
            "Read the failing rank's own error above the abort",
            "other",
        ),
    ),
}

# Dask distributed/nanny.py and distributed/worker_memory.py (the nanny's restart over the memory budget)
_DASK: dict[str, tuple[RuleId, Wording]] = {
    "dask-nanny-memory": (
        "oom",
        (
            "distributed.nanny.memory - WARNING - Worker tcp://10.0.0.5:40123 (pid=4711) exceeded 95% memory budget. Restarting...",
            "failed: out of memory (limit 16Gi; Dask's nanny killed the",
            "Dask's nanny restarted the worker when its",
            "other",
        ),
    ),
    "dask-killed-worker": (
        "oom",
        (
            "distributed.nanny.memory - WARNING - Worker tcp://10.0.0.5:40123 (pid=4711) exceeded 95% memory budget. Restarting...\ndistributed.nanny - WARNING - Restarting worker\ndistributed.scheduler.KilledWorker: Attempted to run task ('train-step', 3) on 3 different workers, but all those workers died while running it.",
            "failed: out of memory (limit 16Gi; Dask's nanny killed the",
            "Dask's nanny restarted the worker when its",
            "other",
        ),
    ),
}

# Spark core/src/main/scala/org/apache/spark/scheduler/ (ExecutorLostFailure), resource-managers/yarn
# (YarnAllocator's diagnostics), resource-managers/kubernetes (ExecutorPodsLifecycleManager) and Hadoop's
# ContainersMonitorImpl
_SPARK: dict[str, tuple[RuleId, Wording]] = {
    "spark-yarn-oom": (
        "oom",
        (
            "ExecutorLostFailure (executor 7 exited caused by one of the running tasks) Reason: Container killed by YARN for exceeding memory limits. 12.1 GB of 12 GB physical memory used. Consider boosting spark.yarn.executor.memoryOverhead.",
            "failed: out of memory — YARN's NodeManager killed a",
            "YARN's NodeManager killed the container for",
            "other",
        ),
    ),
    "spark-k8s-oom": (
        "oom",
        (
            "ExecutorLostFailure (executor 7 exited caused by one of the running tasks) Reason: The executor with id 7 exited with exit code 137(SIGKILL, possible container OOM).",
            "the kernel (as Spark's Kubernetes backend reported it: exit code 137, SIGKILL)",
            "Spark's executor pod went over its memory",
            "other",
        ),
    ),
    "spark-java-oom": (
        "oom",
        (
            "ERROR Executor: Exception in task 3.0 in stage 7.0 (TID 42)\njava.lang.OutOfMemoryError: Java heap space",
            "failed: out of memory — the JVM's heap was used up",
            "The JVM's heap (-Xmx) is smaller than the",
            "other",
        ),
    ),
    "spark-disk": (
        "disk-full",
        (
            "ERROR DiskBlockObjectWriter: Uncaught exception while reverting partial writes to file /tmp/blockmgr-1234/0e/temp_shuffle_5678\njava.io.IOException: No space left on device",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
    "yarn-container-oom": (
        "oom",
        (
            "Container [pid=4711,containerID=container_1732867262_0001_01_000007] is running 1288490188B beyond the 'PHYSICAL' memory limit. Current usage: 13.2 GB of 12 GB physical memory used; 15.0 GB of 25.2 GB virtual memory used. Killing container.",
            "failed: out of memory — YARN's NodeManager killed a",
            "YARN's NodeManager killed the container for",
            "other",
        ),
    ),
}

# ps-lite src/zmq_van.h (BytePS's and MXNet's parameter-server van)
_PS_LITE: dict[str, tuple[RuleId, Wording]] = {
    "byteps-zmq": (
        "mpi-comm",
        (
            "[08:01:02] 3rdparty/ps-lite/src/zmq_van.h:356: Check failed: (rc) != (-1) errno: Connection reset by peer",
            ": communication failure (ps-lite (the parameter server of",
            "ps-lite: DMLC_PS_ROOT_URI / DMLC_PS_ROOT_PORT",
            "other",
        ),
    ),
}

# PaddlePaddle paddle/phi/core/memory/allocation/ (its ResourceExhaustedError on the GPU)
_PADDLE: dict[str, tuple[RuleId, Wording]] = {
    "paddle-gpu-oom": (
        "gpu-oom",
        (
            "ResourceExhaustedError: \n\nOut of memory error on GPU 0. Cannot allocate 1.500000GB memory on GPU 0, 14.750000GB memory has been allocated and available memory is only 256.000000MB.\n\nPlease check whether there is any other process using GPU 0.",
            "failed: GPU out of memory (PaddlePaddle",
            "Lower the per-GPU batch size, or use gradient",
            "other",
        ),
    ),
}

# oneCCL src/atl/ofi/atl_ofi.cpp (its CCL_ERROR on an OFI poll)
_ONECCL: dict[str, tuple[RuleId, Wording]] = {
    "oneccl-abort": (
        "mpi-comm",
        (
            "2026:11:29-08:01:02:(4711) |CCL_ERROR| atl_ofi.cpp:1090 atl_ofi_wait: OFI poll failed, error Input/output error(5)",
            ": communication failure (oneCCL (Intel's collectives, under",
            "oneCCL: run fi_info in the pod to list the",
            "other",
        ),
    ),
}

# torch_npu's caching allocator (its NPU out of memory)
_ASCEND: dict[str, tuple[RuleId, Wording]] = {
    "ascend-oom": (
        "gpu-oom",
        (
            "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity; 58.12 GiB already allocated; 1.20 GiB free; 59.00 GiB reserved in total by PyTorch)",
            "failed: accelerator out of memory (PyTorch's XPU / NPU",
            "Lower the per-GPU batch size, or use gradient",
            "other",
        ),
    ),
}

# Huawei's HCCL under torch_npu (CANN's error codes EI0002 / EI0006, its ``[ERROR] HCCL(pid,name):`` prefix)
# and HCCL on Habana Gaudi (habana_frameworks' process_group_hccl.cpp)
_HCCL: dict[str, tuple[RuleId, Wording]] = {
    "hccl-notify-timeout": (
        "mpi-comm",
        (
            "[ERROR] HCCL(4711,python):2026-11-29-08:01:02.123.456 [hccl_communicator.cc:190] [HcclCommunicator][ExecOp]errNo[0x0000000005000006] notify wait timeout",
            "HCCL timed out waiting on another NPU's rank",
            "HCCL: find the rank that did not arrive",
            "other",
        ),
    ),
    "hccl-ei0002": (
        "mpi-comm",
        (
            "[ERROR] HCCL(4711,python):2026-11-29-08:01:02.123.456 [task_exception_handler.cc:712] EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [3].",
            "HCCL timed out waiting on another NPU's rank",
            "HCCL: find the rank that did not arrive",
            "other",
        ),
    ),
    "hccl-ei0006": (
        "mpi-comm",
        (
            "[ERROR] HCCL(4711,python):2026-11-29-08:01:02.123.456 [transport_manager.cc:123] EI0006: Getting socket times out. Reason: 1. The remote does not initiate a connect request.",
            "HCCL timed out waiting on another NPU's rank",
            "HCCL: find the rank that did not arrive",
            "other",
        ),
    ),
    "habana-hccl": (
        "mpi-comm",
        (
            "RuntimeError: Collective call Allreduce failed!! hcclCommInitRank failed with error hcclSystemError\nException raised from allreduce at /npu-stack/pytorch-integration/python_packages/habana_frameworks/torch/distributed/hccl/process_group_hccl.cpp:544",
            "an HCCL collective on Habana Gaudi returned an error",
            "HCCL on Gaudi: set ENABLE_CONSOLE=true",
            "other",
        ),
    ),
}

# the TPU runtime through XLA (xla/pjrt and the TPU compiler's RESOURCE_EXHAUSTED on HBM)
_TPU: dict[str, tuple[RuleId, Wording]] = {
    "tpu-oom": (
        "gpu-oom",
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 17.92G of 15.48G hbm. Exceeded hbm capacity by 2.44G.",
            "failed: TPU out of memory (XLA ran out of its HBM / VMEM)",
            "Lower the per-GPU batch size, or use gradient",
            "jax",
        ),
    ),
    "tpu-runtime-oom": (
        "gpu-oom",
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 2.00G. That was not possible. There are 1.20G free.",
            "failed: TPU out of memory (its runtime could not allocate a",
            "Lower the per-GPU batch size, or use gradient",
            "jax",
        ),
    ),
}

# DeepSpeed deepspeed/launcher/launch.py (sigkill_handler), torch elastic's
# torch/distributed/elastic/multiprocessing/api.py under Accelerate's launcher, Lightning's run of torch's
# allocator
_LAUNCHERS: dict[str, tuple[RuleId, Wording]] = {
    "deepspeed-launcher-kill": (
        "oom",
        (
            "[2026-11-29 08:01:02,123] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 4711\n[2026-11-29 08:01:02,123] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=3'] exits with return code = -9\nOut of memory: Killed process 4711 (python)",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that",
            "deepspeed",
        ),
    ),
    "deepspeed-launcher-segv": (
        "segfault",
        (
            "[2026-11-29 08:01:02,123] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=3'] exits with return code = -11",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "deepspeed",
        ),
    ),
    "accelerate-segv": (
        "segfault",
        (
            "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -11) local_rank: 3 (pid: 4711) of binary: /usr/bin/python\nsubprocess.CalledProcessError: Command '['accelerate', 'launch', 'train.py']' died with <Signals.SIGSEGV: 11>.",
            "crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "pytorch",
        ),
    ),
    "accelerate-sigkill": (
        "oom",
        (
            "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 3 (pid: 4711) of binary: /usr/bin/python\nkernel: Memory cgroup out of memory: Killed process 4711 (python)",
            "failed: out of memory (limit 16Gi; the kernel killed python)",
            "Raise the memory limit of the role that",
            "pytorch",
        ),
    ),
    "torch-elastic-sigkill-oom": (
        "oom",
        (
            "torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 4711 closing signal SIGTERM\ntorch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0 (pid: 4711) of binary: /usr/bin/python\nOut of memory: Killed process 4711 (python) total-vm:98765432kB, anon-rss:87654321kB",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that",
            "pytorch",
        ),
    ),
    "lightning-gpu-oom": (
        "gpu-oom",
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.20 GiB is free.\nlightning.fabric.utilities.exceptions.MisconfigurationException",
            "failed: CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
}

# SQLite src/main.c (sqlite3ErrStr: SQLITE_FULL's ``database or disk is full``) as its shell and Python's
# sqlite3 raise it
_SQLITE: dict[str, tuple[RuleId, Wording]] = {
    "sqlite-full": (
        "disk-full",
        (
            "sqlite3.OperationalError: database or disk is full",
            "a SQLite database could not grow: its disk is full",
            "SQLite could not grow its database file",
            "other",
        ),
    ),
    "sqlite-full-c": (
        "disk-full",
        (
            "Error: stepping, database or disk is full (13)",
            "a SQLite database could not grow: its disk is full",
            "SQLite could not grow its database file",
            "other",
        ),
    ),
}

# HDF5 src/H5FDsec2.c (H5FD__sec2_write's ``file write failed`` with errno and its message) and h5py's
# OSError over it
_HDF5: dict[str, tuple[RuleId, Wording]] = {
    "hdf5-write": (
        "disk-full",
        (
            "HDF5-DIAG: Error detected in HDF5 (1.12.2) thread 0:\n  #000: H5Dio.c line 291 in H5Dwrite(): can't write data\n    major: Dataset\n    minor: Write failed\n  #005: H5FDsec2.c line 853 in H5FD__sec2_write(): file write failed: time = Sun Nov 29 08:01:02 2026\n, filename = '/ckpt/model.h5', file descriptor = 7, errno = 28, error message = 'No space left on device', buf = 0x7f1e2a, total write size = 1048576",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
    "hdf5-quota": (
        "disk-full",
        (
            "  #005: H5FDsec2.c line 853 in H5FD__sec2_write(): file write failed: time = Sun Nov 29 08:01:02 2026\n, filename = '/home/team/model.h5', file descriptor = 7, errno = 122, error message = 'Disk quota exceeded', buf = 0x7f1e2a, total write size = 1048576",
            "failed: disk quota exceeded",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
    "h5py-oserror": (
        "disk-full",
        (
            "OSError: [Errno 28] Can't write data (file write failed: time = Sun Nov 29 08:01:02 2026\n, filename = '/ckpt/model.h5', file descriptor = 7, errno = 28, error message = 'No space left on device', buf = 0x7f1e2a, total write size = 1048576, bytes this sub-write = 1048576, bytes actually written = 18446744073709551615, offset = 0)",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "other",
        ),
    ),
}

# Docker's layer store (daemon/graphdriver, ``failed to register layer``) and containerd's CRI image pull
# (pkg/cri/server/image_pull.go) on a full disk
_CONTAINER_RUNTIMES: dict[str, tuple[RuleId, Wording]] = {
    "docker-pull-nospace": (
        "disk-full",
        (
            "failed to register layer: Error processing tar file(exit status 1): write /usr/lib/x86_64-linux-gnu/libcudnn.so.8: no space left on device",
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "kubernetes",
        ),
    ),
    "containerd-pull-nospace": (
        "disk-full",
        (
            'Failed to pull image "nvcr.io/nvidia/pytorch:24.01-py3": rpc error: code = Unknown desc = failed to pull and unpack image "nvcr.io/nvidia/pytorch:24.01-py3": failed to extract layer sha256:1234: write /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/12/fs/usr/lib/libcudnn.so: no space left on device: unknown',
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "kubernetes",
        ),
    ),
    "docker-extract-nospace": (
        "disk-full",
        (
            'Warning  Failed     12s   kubelet  Failed to pull image "nvcr.io/nvidia/pytorch:24.01-py3": rpc error: code = Unknown desc = write /var/lib/docker/tmp/GetImageBlob123456: no space left on device',
            "failed: no space left on device",
            "See which filesystem is full: kubectl -n team",
            "kubernetes",
        ),
    ),
}

# kubectl's printers (pkg/printers/internalversion/printers.go: get pods' STATUS column, describe's State /
# Last State blocks)
_KUBECTL: dict[str, tuple[RuleId, Wording]] = {
    "kubectl-get-oomkilled": (
        "oom",
        (
            "NAME                 READY   STATUS      RESTARTS      AGE\ntrain-worker-0       0/1     OOMKilled   3 (42s ago)   12m\ntrain-launcher       1/1     Running     0             12m",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "kubernetes",
        ),
    ),
    "kubectl-get-oom-restart": (
        "oom",
        (
            "train-worker-1   0/1   OOMKilled   0          3m",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "kubernetes",
        ),
    ),
    "kubectl-describe-oom": (
        "oom",
        (
            "    State:          Waiting\n      Reason:       CrashLoopBackOff\n    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n      Started:      Sun, 29 Nov 2026 08:01:02 +0000\n      Finished:     Sun, 29 Nov 2026 08:11:02 +0000",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "kubernetes",
        ),
    ),
    "kubectl-describe-error-137": (
        "oom",
        (
            "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137",
            "failed: out of memory (limit 16Gi)",
            "Raise the memory limit of the role that",
            "kubernetes",
        ),
    ),
}

# the kubelet's eviction manager (pkg/kubelet/eviction/helpers.go's messages) and the API server's quota
# admission, as a managed cluster's client (GKE, EKS, AKS) relays them into a log
_KUBELET_RELAYED: dict[str, tuple[RuleId, Wording]] = {
    "eks-evicted-memory": (
        "oom",
        (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 41236Ki. Container trainer was using 30512340Ki, request is 8Gi, has larger consumption of memory.",
            "failed: out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that",
            "kubernetes",
        ),
    ),
    "aks-disk-pressure": (
        "disk-full",
        (
            "The node was low on resource: ephemeral-storage. Threshold quantity: 10%, available: 1523412Ki. Container trainer was using 96Gi, request is 0, has larger consumption of ephemeral-storage.",
            "failed: the kubelet evicted the pod: the node was low on",
            "See which filesystem is full: kubectl -n team",
            "kubernetes",
        ),
    ),
    "gke-quota": (
        "quota",
        (
            'Error creating: pods "train-worker-3" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8',
            ": ResourceQuota gpu-quota is exhausted for",
            "See the quota and what uses it: kubectl -n",
            "kubernetes",
        ),
    ),
}


_SOURCES: dict[str, dict[str, tuple[RuleId, Wording]]] = {
    "slurm": _SLURM,
    "pbs": _PBS,
    "lsf": _LSF,
    "grid-engine": _GRID_ENGINE,
    "flux": _FLUX,
    "cray": _CRAY,
    "jsm": _JSM,
    "intel-mpi": _INTEL_MPI,
    "mpich-banner": _MPICH_BANNER,
    "open-mpi-noticed": _OPEN_MPI_NOTICED,
    "openfoam": _OPENFOAM,
    "fortran": _FORTRAN,
    "julia": _JULIA,
    "r": _R,
    "jvm": _JVM,
    "dotnet": _DOTNET,
    "node": _NODE,
    "python": _PYTHON,
    "ray": _RAY,
    "dask": _DASK,
    "spark": _SPARK,
    "ps-lite": _PS_LITE,
    "paddle": _PADDLE,
    "oneccl": _ONECCL,
    "ascend": _ASCEND,
    "hccl": _HCCL,
    "tpu": _TPU,
    "launchers": _LAUNCHERS,
    "sqlite": _SQLITE,
    "hdf5": _HDF5,
    "container-runtimes": _CONTAINER_RUNTIMES,
    "kubectl": _KUBECTL,
    "kubelet-relayed": _KUBELET_RELAYED,
}


@pytest.mark.parametrize(WORDING_ARGS, catalog_rows(_SOURCES))
def test_a_launchers_or_runtimes_own_message_is_its_familys_with_its_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# the kubelet's eviction manager (pkg/kubelet/eviction/helpers.go: the pod's, a container's and an emptyDir's
# ephemeral-storage limits, the node's memory) and GKE's cluster autoscaler (its FailedScaleUp visibility
# event on the project's Compute Engine quota) as Events
_EVENTS: dict[str, tuple[RuleId, str, str, str, str]] = {
    "kubelet-evicted-pod-ephemeral": (
        "disk-full",
        "Evicted",
        "Pod ephemeral local storage usage exceeds the total limit of containers 10Gi.",
        "its ephemeral local storage exceeded its containers' total limit (10Gi)",
        "Ephemeral storage is the node's disk under",
    ),
    "kubelet-evicted-container-ephemeral": (
        "disk-full",
        "Evicted",
        'Container trainer exceeded its local ephemeral storage limit "20Gi".',
        "container trainer exceeded its ephemeral-storage limit (20Gi)",
        "Ephemeral storage is the node's disk under",
    ),
    "kubelet-evicted-emptydir": (
        "disk-full",
        "Evicted",
        'Usage of EmptyDir volume "dshm" exceeds the limit "8Gi".',
        "emptyDir volume dshm exceeded its sizeLimit (8Gi)",
        "Ephemeral storage is the node's disk under",
    ),
    "kubelet-evicted-node-memory": (
        "oom",
        "Evicted",
        (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 41236Ki. Container "
            "trainer was using 30512340Ki, request is 8Gi, has larger consumption of memory."
        ),
        "its node was low on memory",
        "Set each role's memory request equal to its limit",
    ),
    "gke-autoscaler-gce-quota": (
        "quota",
        "FailedScaleUp",
        (
            "Node scale up in zones us-central1-a associated with this pod failed: GCE quota exceeded. Pod "
            "is at risk of not being scheduled."
        ),
        "GKE's cluster autoscaler could not add a node in us-central1-a",
        "The quota is the cloud project's, not the namespace's",
    ),
}


@pytest.mark.parametrize(
    ("rule", "reason", "text", "said", "step"),
    [pytest.param(*row, id=key) for key, row in _EVENTS.items()],
)
def test_a_managed_clusters_event_is_its_familys(
    rule: RuleId, reason: str, text: str, said: str, step: str
) -> None:
    fires_saying(text, rule, said, step, stack="pytorch", where="event", reason=reason)


def test_the_catalogs_reach_every_rule_but_the_gpu_errors() -> None:
    """The rows cover each rule a launcher's, a runtime's or a framework's own line reaches, under one id each."""
    rules = {rule for table in _SOURCES.values() for rule, _ in table.values()}
    rules |= {row[0] for row in _EVENTS.values()}
    assert rules == {"oom", "gpu-oom", "segfault", "disk-full", "quota", "mpi-comm", "mpi-abort"}
    keys = [key for table in _SOURCES.values() for key in table]
    assert len(keys) == len(set(keys))


# the same sources' lines that report no failure of these rules: INFO, a limit the run went on after, advice,
# a listing of pods that ended well
_QUIET: dict[str, tuple[str, str]] = {
    # advice naming HCCL's notify wait timeout
    "hccl-advice": (
        "Set HCCL_EXEC_TIMEOUT higher if you see notify wait timeout on a slow first step.",
        "other",
    ),
    # Slurm src/slurmd/slurmstepd/req.c: a step cancelled at its time limit (no failure of these rules)
    "slurm-time-limit": (
        "slurmstepd: error: *** STEP 4711.0 ON gpu-node-1 CANCELLED AT 2026-11-29T08:01:02 DUE TO TIME LIMIT ***",
        "other",
    ),
    # Slurm src/srun/allocate.c: the allocation waited for
    "slurm-queued": (
        "srun: job 4711 queued and waiting for resources\nsrun: job 4711 has been allocated resources",
        "other",
    ),
    # Slurm src/srun/opt.c: option help, naming memory
    "slurm-mem-options": ("srun: error: --mem and --mem-per-cpu are mutually exclusive.", "other"),
    # Slurm's sacct row of a completed step
    "slurm-sacct-completed": ("4711.0           python  COMPLETED      0:0 ", "other"),
    # Slurm contribs/seff: the job's memory use, under its grant
    "slurm-seff": ("Memory Utilized: 14.50 GB\nMemory Efficiency: 45.31% of 32.00 GB", "other"),
    # PBS src/resmom/mom_main.c: a job over its walltime, not its memory
    "pbs-walltime": ("=>> PBS: job killed: walltime 3650 exceeded limit 3600", "other"),
    # LSF's TERM_RUNLIMIT: the run time limit, not memory
    "lsf-runlimit": (
        "TERM_RUNLIMIT: job killed after reaching LSF run time limit.\nExited with exit code 140.",
        "other",
    ),
    # LSF's job report of a job that succeeded, its memory use listed
    "lsf-success": (
        "Successfully completed.\n\nResource usage summary:\n\n    CPU time :                                   118260.10 sec.\n    Max Memory :                                 30123 MB",
        "other",
    ),
    # Cray ALPS's resource summary of an application
    "alps-resources": (
        "Application 4711 resources: utime ~12s, stime ~3s, Rss ~10240, inblocks ~0, outblocks ~0",
        "other",
    ),
    # Intel MPI's startup banner (I_MPI_DEBUG)
    "impi-startup": (
        "[0] MPI startup(): Intel(R) MPI Library, Version 2021.10  Build 20230619 (id: c2e19c2f3e)",
        "intel-mpi",
    ),
    # OpenFOAM src/OSspecific/POSIX/signals/sigFpe.C: trapping enabled at start
    "openfoam-sigfpe-enabled": (
        "sigFpe : Enabling floating point exception trapping (FOAM_SIGFPE).\nsetRootCase: enabling signal handlers",
        "other",
    ),
    # libgfortran runtime/stop.c: the IEEE flags noted at STOP
    "gfortran-ieee-note": (
        "Note: The following floating-point exceptions are signalling: IEEE_UNDERFLOW_FLAG IEEE_DENORMAL",
        "other",
    ),
    # R src/main/memory.c: a warning the allocation went on after
    "r-allocation-warning": (
        "Warning message:\nIn rnorm(1e+08) : Reached total allocation of 16000Mb: see help(memory.size)",
        "other",
    ),
    # the JVM echoing JAVA_TOOL_OPTIONS, naming OutOfMemoryError
    "jvm-heapdump-flag": ("Picked up JAVA_TOOL_OPTIONS: -XX:+HeapDumpOnOutOfMemoryError -Xmx8g", "other"),
    # advice naming V8's heap message
    "node-heap-advice": (
        "Set NODE_OPTIONS=--max-old-space-size=8192 if the build fails with JavaScript heap out of memory.",
        "other",
    ),
    # .NET's host started
    "dotnet-started": (
        "info: Microsoft.Hosting.Lifetime[0]\n      Application started. Press Ctrl+C to shut down.",
        "other",
    ),
    # Ray python/ray/_private/worker.py at INFO
    "ray-started": ("2026-11-29 08:01:02,123\tINFO worker.py:1724 -- Started a local Ray instance.", "other"),
    # Dask distributed/worker_memory.py: the worker paused at its pause threshold (it goes on)
    "dask-pausing": (
        "distributed.worker.memory - WARNING - Worker is at 82% memory usage. Pausing worker.  Process memory: 13.1 GiB -- Worker memory limit: 16.0 GiB",
        "other",
    ),
    # Dask distributed/worker_memory.py: a warning on unmanaged memory
    "dask-unmanaged": (
        "distributed.worker.memory - WARNING - Unmanaged memory use is high. This may indicate a memory leak or the memory may not be released to the OS.",
        "other",
    ),
    # Spark core MemoryStore at INFO
    "spark-memorystore": ("INFO MemoryStore: MemoryStore started with capacity 2004.6 MiB", "other"),
    # advice naming Spark's memory overhead
    "spark-overhead-advice": (
        "Consider boosting spark.executor.memoryOverhead if executors are lost.",
        "other",
    ),
    # SQLite's page-count pragma echoed
    "sqlite-pragma": ("PRAGMA max_page_count = 1073741823;", "other"),
    # HDF5 src/H5F.c: a file it could not open (no disk word)
    "hdf5-open-failed": (
        "HDF5-DIAG: Error detected in HDF5 (1.12.2) thread 0:\n  #000: H5F.c line 620 in H5Fopen(): unable to open file\n    major: File accessibility\n    minor: Unable to open file",
        "other",
    ),
    # kubectl get pods: running and completed
    "kubectl-get-running": (
        "NAME                 READY   STATUS      RESTARTS   AGE\ntrain-worker-0       1/1     Running     0          12m\ntrain-worker-1       0/1     Completed   0          12m",
        "kubernetes",
    ),
    # kubectl describe: a container that completed
    "kubectl-describe-completed": (
        "    State:          Terminated\n      Reason:       Completed\n      Exit Code:    0",
        "kubernetes",
    ),
    # DeepSpeed deepspeed/launcher/launch.py: a process that exited successfully
    "deepspeed-rc0": (
        "[2026-11-29 08:01:02,123] [INFO] [launch.py:347:main] Process 4711 exits successfully.",
        "deepspeed",
    ),
    # Flux src/shell/oom.c at DEBUG: its cgroup's limit
    "flux-exit-0": ("flux-shell[0]: DEBUG: oom: memory.max = 17179869184", "other"),
    # advice naming SQLITE_FULL's message
    "sqlite-advice": (
        "If you see 'database or disk is full', free space on the volume that holds the database.",
        "other",
    ),
    # the kubelet's Pulled event line
    "containerd-pulled": (
        'Successfully pulled image "nvcr.io/nvidia/pytorch:24.01-py3" in 1m12.3s (1m12.3s including waiting)',
        "kubernetes",
    ),
    # Spark's Kubernetes backend on an executor that exited cleanly
    "spark-executor-exit0": ("The executor with id 7 exited with exit code 0(success).", "other"),
    # a program's fallback after an allocation it could not make
    "numpy-alloc-retry": (
        "Unable to allocate the full cache in RAM; falling back to memory-mapped arrays.",
        "other",
    ),
    # Slurm src/plugins/task/cgroup/task_cgroup_memory.c: the cgroup's failcnt (memory reclaimed at the
    # limit), no kill
    "slurm-exceeded-step-at-some-point": (
        "slurmstepd: error: Exceeded step memory limit at some point.",
        "other",
    ),
    # kubectl get pods: an ended container whose status names no family
    "kubectl-get-error": (
        "NAME             READY   STATUS                   RESTARTS   AGE\ntrain-worker-0   0/1     ContainerStatusUnknown   1          3h\ntrain-worker-1   0/1     Error                    0          3h",
        "kubernetes",
    ),
    # GKE's cluster autoscaler scaling up (no quota hit)
    "gke-scale-up-ok": ("pod triggered scale-up: [{gke-gpu-pool 1->2 (max: 4)}]", "kubernetes"),
    # Ray's memory monitor's settings echoed
    "ray-oom-config-echo": ("RAY_memory_usage_threshold=0.95 RAY_memory_monitor_refresh_ms=250", "other"),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_sources_line_that_reports_no_failure_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
