"""Reading log tails: GPU out-of-memory, lost MPI peers, failed ranks, the last error.

The watcher attaches a bounded tail (a few dozen lines) of a container's log when it
ends in error, and the launcher's tail carries every rank's output (mpirun forwards it).
The readers here turn a tail into structured facts:

- :func:`gpu_oom_lines` — GPU memory ran out, as PyTorch / CUDA, ROCm, TensorFlow, JAX/XLA,
  cuBLAS, cuDNN or NCCL say it, with the rank when the line carries an output tag
  (``[1,5]<stderr>:``, ``[rank5]:``, ``[5] ``);
- :func:`comm_failures` — the launcher could not reach or lost a worker: ssh refused,
  timed out, closed, key rejected, host not resolved (OpenSSH); daemons not started, failed
  or lost (Open MPI ORTE, PRRTE); Hydra could not connect or lost a proxy (MPICH, Intel MPI);
  an MPI error stack naming a communication error;
- :func:`rank_failures` — a rank aborted (``MPI_ABORT``/``MPI_Abort``), was killed by a
  signal, or exited non-zero, with the host it ran on when the log names it — as Open MPI,
  MPICH (Hydra and the older MPD), Intel MPI, torch elastic (``ChildFailedError``) and the
  DeepSpeed launcher report it;
- :func:`last_error` — the line that says what went wrong: the exception closing the last
  Python traceback, else the last exception or error line.

Messages are matched on their stable wording; multi-line blocks (``Remote daemon: … on
node X``, ``RUNNING AT X``, torch elastic's ``Root Cause`` block) are read from the few
lines after the headline.

Reading stays bounded and linear whatever a workload prints: :func:`bounded` keeps at most
:data:`MAX_TAIL_LINES` lines of at most :data:`MAX_LINE_CHARS` characters, and every pattern
in this package starts with a literal or an anchor and uses bounded quantifiers only, so no
pattern backtracks over a long line (``tests/rules/test_rules_read_logs_in_linear_time.py``).
Tails are immutable tuples, so results are cached.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

_CONTEXT_LINES = 10

MAX_LINE_CHARS = 4096
"""Longer lines keep their first and last halves: messages start a line, and some end it
(DeepSpeed's ``… exits with return code = 1`` after the whole command line)."""
MAX_TAIL_LINES = 400
"""Lines of a tail read at most (the last ones); the watcher sends far fewer."""

_HALF = MAX_LINE_CHARS // 2


@lru_cache(maxsize=1024)
def bounded(tail: tuple[str, ...]) -> tuple[str, ...]:
    """``tail`` as the readers see it: the last lines, each at most :data:`MAX_LINE_CHARS`, and a
    line of prose about an error (:func:`prose`) read as a blank line — every reader starts here."""
    lines = tail[-MAX_TAIL_LINES:]
    if any(len(line) > MAX_LINE_CHARS for line in lines):
        lines = tuple(
            line if len(line) <= MAX_LINE_CHARS else f"{line[:_HALF]} … {line[-_HALF:]}" for line in lines
        )
    told = prose(lines)
    if not told:
        return lines
    return tuple((reported(line) or "") if i in told else line for i, line in enumerate(lines))


# ------------------------------------------------------------------ prose

_RUST_UNWRAP = re.compile(
    r"\bcalled `(?:Result|Option)::(?:unwrap|expect|unwrap_err|expect_err)\(\)` on (?:an? )?`(?:Err|Ok|None)`"
)
"""Rust's panic on an unwrapped error (core's ``unwrap_failed``: ``called `Result::unwrap()` on an `Err`
value: DriverError(…)``, ``called `Option::unwrap()` on a `None` value``) under the runtime's ``thread '…'
panicked at …``: backticks of its own, not a writer's inline code (what cudarc, candle, burn or mistral.rs
panic with)."""
_PRINTED = re.compile(
    r"^\s{0,8}(?:\[|<|\(pid=|\((?:raylet|gcs_server|autoscaler|monitor)(?:, ip=[\w.:]{1,45})?\) "
    r"|\([\w.]{1,80} pid=\d|\{|\d{1,4}[-/:.]\d|[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:|[EWIFD]\d{4} "
    r"|[\w.-]{1,60}:\d{1,10}:|[\w.-]{1,40}: |(?:[\w.]{1,120}\.)?[A-Z]\w{0,80}(?:Error|Exception|Warning)\b"
    r"|(?:ERROR|WARN(?:ING)?|INFO|FATAL|CRITICAL|DEBUG)\b|(?:CUDA|HIP|NCCL|cuDNN|cuBLAS) error: "
    r"|process didn't exit successfully: `|The replica [\w-]{1,80} (?:ran out of memory|exited with) )"
    r"|\b[\w/.-]{1,120}\.(?:c|cc|cpp|cu|cuh|h|hpp|py|go|rs|java):\d{1,6}\b|\bNCCL (?:WARN|INFO)\b"
    # logfmt, as Go's logrus and go-kit write it (``time="2020-04-21T17:02:40Z" level=info msg="…"``, ``ts=…
    # level=error msg=…``): a controller's line, whatever its message's words
    r"|^\s{0,8}(?:time|ts)=\"?\d{4}-\d\d|\blevel=(?:trace|debug|info|warn|warning|error|fatal|panic) msg="
    # a C runtime's banner between spaced asterisks (glibc's ``*** Error in `python3': …: 0x… ***``, Open
    # MPI's ``*** Process received signal ***``), not Markdown's emphasis, which has no space inside it
    r"|^\s{0,8}\*\*\* [^*\n]{1,300} \*\*\*"
    # a batch scheduler's mail to the job's owner, naming its job by id (the PBS epilogue of NASA's HECC:
    # ``Your Pleiades job 1234.pbspl1.nas.nasa.gov terminated due to …``): the scheduler's words, no person's
    r"|^\W{0,2}Your (?:[\w-]{1,40} )?job \d{1,12}(?:\.[\w.-]{1,200})? "
    # a Kubernetes object's condition as YAML lists it (``kubectl get … -o yaml``: ``- message: '…'``, ``-
    # lastTransitionTime: …``, ``- type: Ready``), the API server's fields, no Markdown list item
    r"|^\s{0,16}- (?:message|reason|type|status|lastTransitionTime|lastProbeTime|lastUpdateTime): "
    # Azure Machine Learning's job service relaying its error by code (``Job submission to AzureML Compute
    # encountered an Exception with status code JobNodeCountExceedsCoreQuota, The specified subscription
    # …``), the service's words even where they go on to address the reader
    r"|\bwith status code (?:JobNodeCountExceedsCoreQuota|ClusterCoreQuotaReached|OutOfQuota)\b"
    rf"|{_RUST_UNWRAP.pattern}"
)
"""A program's format: a prefix (a bracket, a timestamp, syslog's or glog's date, a level, ``host:pid:``,
Ray's tag of the process whose line it relays: ``(raylet)``, ``(RayTrainWorker pid=N)``; ``program: ``, an
exception's class, a GPU library's ``CUDA error: ``, cargo's ``process didn't exit successfully: `…` ``
under its ``Caused by:``, Rust's panic on an unwrapped ``Err`` (``called `Result::unwrap()` on an `Err`
value:``), Vertex AI's job error on a replica, which goes on to address the reader: ``The replica
workerpool0-0 ran out of memory … please check the logs``, logfmt's fields) or a source location
(``file.c:NN``)."""
_EXPECTED = (
    r"^\s{0,8}(?:#{1,6} {1,2}|[-*] {1,4})?(?:\*\*)?(?:Expected|Desired|Intended)"
    r"(?: (?:behaviou?r|results?|outcome|value|state))?(?:\*\*)?\s{0,2}(?::|\*\*|$)"
)
"""What should happen, not what did: a bug report's expected-behaviour field (``**Expected:** the pod reports
`OOMKilled` ``, ``### Expected behavior``, ``Expected result:``) or a test's expected value (``Expected: exit
code 137``) — what it quotes is no report."""
_LOOK_FOR = (
    r"(?:^|[.!?;] )\s{0,8}(?:[-*\u2022] {1,4}|\d{1,2}[.)] {1,4})?(?:Check|Look|Search|Grep|Scan)"
    r"(?: (?:in|at|through))?(?: (?:the|your|its|each|every|all|a))?(?: [\w./'\u2019-]{1,40}){0,3}? for\b"
)
"""A troubleshooting step telling the reader what to look for (``Check the logs for CUDA out of memory or
similar messages``, ``Look in the node's dmesg for …``, ``Search the launcher output for …``), an imperative
opening its sentence: what to search, not what was found."""
_DISCOURSE = re.compile(
    r"\bI(?:'m|'ve|'d)?\b(?![/.-])"
    r"|\b(?:[Ww]e|[Ww]e're|[Oo]ur|[Mm]y|[Yy]ou|[Yy]ou['\u2019](?:re|ll|ve|d)|[Yy]our)\b"
    r"|\b(?:[Hh]ey|[Tt]hanks)\b|(?:^|\s)@[\w-]{1,40}\b"
    r"|\b(?:means|is caused by|are caused by|refers to|stands for|[Nn]ote that|[Ff]or (?:example"
    r"|instance)|[Dd]eep dive|[Mm]ost common|[Cc]ommon (?:reasons?|causes?|codes?)|[Rr]easons? for"
    r"|can (?:also )?(?:return|occur|happen|mean|leave|be caused)"
    r"|(?:may|might|can|could|will) (?:output|print|show|report|see|get|hit|happen|occur)\b"
    r"|(?:a|the) (?:message|error|line|output) (?:like|such as)\b|such as|covering)\b"
    r"|(?:^|[.!?] )(?:Observed|Seeing|Saw|Noticed|Getting)\b|\b(?:e\.g|i\.e)\."
    # a document's account of an error or its symptoms in the generic present: what it is (``The
    # RendezvousTimeoutError occurs when …``, ``This typically indicates …``), when programs hit it
    # (``Applications … intermittently fail with …, especially during …``, ``Typical impact includes``)
    r"|\b(?:occurs|happens|arises|is raised|is thrown) (?:when|if|whenever)\b"
    r"|\b(?:typically|usually|often|generally) (?:indicates?|means|points to)\b"
    r"|\b(?:intermittently|occasionally|sometimes|typically|frequently) (?:fail|crash|abort|error)s? "
    r"(?:with|on)\b"
    r"|\b[Tt]ypical (?:impact|symptoms?|causes?)\b|\bespecially (?:during|when|if|on|after)\b"
    # how often an error comes, said of it in the generic present (``ENOSPC is a rather infrequent event``,
    # ``OOM kills are rare``, ``this rarely happens``): a design note's judgement, not a report
    r"|\b(?:is|are) (?:an? )?(?:rather |very |quite |fairly |relatively |extremely )?"
    r"(?:rare|infrequent|uncommon|unusual|frequent)\b"
    r"|\b(?:rarely|seldom) (?:happens|occurs|comes up|fails)\b"
    # what code is about to raise, said before it runs (``# This line will raise: …``, ``this call should
    # throw …``): a reproduction's comment, not the run's output
    r"|\b(?:will|would|should|is (?:going|expected) to) (?:raise|throw)\b"
    rf"|{_LOOK_FOR}|{_EXPECTED}"
)
"""The register of a page or a comment that explains an error: someone addressed or speaking, an
explanation (``means``, ``is caused by``, ``for example``), reported speech (``Observed …``), a
hypothetical (``can return ENOSPC when``, ``may output a message like``)."""
_MARKUP = re.compile(r"`[^`]{1,120}`|\*\*[^*]{1,120}\*\*|^\s{0,8}#{1,6} \S|^\s{0,8}(?:[-*•]|\d{1,2}[.)]) \S")
"""Markdown a document is written in: inline code, emphasis, a heading, a list item."""
_EXPLAINED_ITEM = re.compile(r" [\u2014\u2013] |^\s{0,8}(?:[-*•]|\d{1,2}[.)]) [^:]{1,60}: [A-Za-z]")
"""A list item that explains a term (``- Xid 79: GPU fallen off the bus — …``)."""
_EXAMPLES = re.compile(
    # what a reader will see, or get, if they do it (``You will get error if you exceed the limit:``, a page
    # demonstrating a command and the error it prints), or the output a page expects (``Expected output:``)
    r"(?:\b(?:[Yy]ou|[Oo]ne) (?:will|would|may|might|can|could|['\u2019]ll) "
    r"(?:see|get|receive|hit|run into)\b"
    r"|\b(?:[Ee]xpected|[Ss]ample|[Ee]xample) output\b"
    r"|\b[Ff]or (?:example|instance)\b|\be\.g\.|\bsuch as\b|\blike this\b|\blooks? like\b"
    r"|\b[Ee]xamples?\b|\b[Tt]ypical\b|\b(?:the|this) (?:following )?(?:form|format)\b"
    # a change's account of what a message would show before it and will show after it (``Previously, the
    # error message would show:``, ``Now it will show:``)
    r"|\b(?:would|will|should|now) (?:show|print|read|display|say|look like)\b"
    # how an error shows to the user (``A recv timeout currently surfaces as:``, ``… manifests as:``), and
    # what a program does in general, an indefinite message (``It logs a concise message instead of a
    # traceback:``): a feature request's or a change's account, the example under it
    r"|\b(?:surfaces?|manifests?(?: itself)?|shows? up|presents? itself) as\b"
    r"|\b(?:logs|prints|emits|displays|outputs|raises) an? (?:[\w,-]{1,30} ){0,4}(?:message|error|warning)\b"
    # what a failure looks like, in the plural (``Attempts to create a Pod fail with messages like:``)
    r"|\b(?:messages|errors|warnings|lines|output) like\b"
    # a page's demonstration, the output of the code it shows above (``Here is the resulting error
    # message:``, ``The resulting traceback is:``, ``This produces the following error:``), not a writer's
    # own run (``I get:``)
    r"|\b(?:[Hh]ere is|[Tt]his is|[Bb]elow is) the resulting\b"
    r"|^\s{0,8}[Tt]he resulting (?:error|output|message|traceback|exception)\b"
    r"|\b(?:[Tt]his|[Ww]hich|[Ii]t) (?:produces|yields|gives) the following\b"
    r")[^\n]{0,200}:\s{0,4}$"
    # a writer's account of failures that come now and then, the message they show standing under it, no colon
    # after it (``We see occasional (random) CI failures with the message``): the recurring failure's example,
    # as the generic account of one (``… intermittently fail with …``) is a page's
    r"|\b(?:occasional|intermittent|sporadic|random|flaky)\b[^\n]{0,120}?\bwith (?:the|this|an?) "
    r"(?:following )?(?:error )?(?:message|error|output)\s{0,4}$"
    # the same sentence in a language written without spaces, a full-width colon or not
    # (``典型错误信息包括:``, ``例えば:``): for example, such as, typical, as follows, includes
    r"|(?:例如|比如|譬如|例えば|典型|如下|以下|包括|类似|類似)[^\n]{0,200}[:\uff1a]\s{0,4}$"
    # a document saying where and how a program writes a message, the message's format under it (``On
    # Linux, XIDs are written to the kernel log as`` then a code block)
    r"|\b(?:is|are) (?:written|printed|logged|reported|shown|formatted|emitted) (?:to|in|into|on|by) "
    r"[^\n]{1,120}? as\s{0,4}$"
)
"""A sentence that introduces examples or a format: the lines under it are quoted, not printed by the
run."""
_API_HEADER = re.compile(
    # Sphinx's entry of an exception or a class (``exception cuda.core.CUDAOutOfMemoryError#``, ``class
    # torch.cuda.OutOfMemoryError``), its module's path before the name, its permalink after it
    r"^\s{0,8}(?:exception|class) (?:[A-Za-z_]\w{0,60}\.){1,12}[A-Za-z_]\w{0,80}(?:\([^\n]{0,300}\))?"
    r"\s{0,2}[#\u00b6]?\s{0,4}$"
    # its entry of a function, its annotated signature and return type
    # (``espnet2.….is_out_of_memory_error(exc: BaseException) → bool``, spaced around its arrow): a
    # page's, not a program's (a traceback's source line says ``def`` and ends in ``:``; C++'s ``a.b(x)->c``
    # is unspaced)
    r"|^\s{0,8}(?:[A-Za-z_]\w{0,60}\.){1,12}[A-Za-z_]\w{0,80}\([^\n]{0,300}\) {1,2}(?:\u2192|->) {1,2}"
    r"[\w.\[\], |]{1,120}\s{0,2}[#\u00b6]?\s{0,4}$"
)
"""The header of an API reference's entry (an exception class, a function), as documentation renders it: every
line under it is its documentation (what raises it, what it returns), however alarming its words."""
_GUIDE_SECTION = re.compile(
    r"^\s{0,8}(?:#{1,6} {1,2})?(?:\*\*)?"
    r"(?:When to [Uu]se(?: (?:it|this|this skill|this guide|[Tt]his [Ss]kill))?"
    r"|(?:Common |Typical )?[Ss]ymptoms|Use (?:it|this) when|Common (?:errors|failures|problems|issues)"
    r"|Signs|Triggers)(?:\*\*)?\s{0,2}:?\s{0,2}[\u00b6#]?\s{0,4}$"
)
"""A guide's section heading that lists the failures it is for (``When to Use``, ``Symptoms``, with the
permalink sign a rendered page puts after it: ``Common Symptoms¶``): its list items name failures, they report
none, nor do the examples an item introduces (``- Validation Errors: … fail with messages like:``)."""
_LIST_ITEM = re.compile(r"^\s{0,8}(?:[-*\u2022\u25aa\u25e6]|\d{1,2}[.)]) {1,4}\S")
_SUMMARY = re.compile(
    r"^\s{0,8}(?:#{1,6} {1,2})?(?:\*\*)?(?:Summari[sz]ing|(?:In |A )?[Ss]ummary(?: of)?|Recap(?:ping)?"
    r"|Timeline(?: of)?|Post-?mortem(?: of)?|Retrospective(?: of)?)\b[^\n]{0,200}:(?:\*\*)?\s{0,4}$"
)
"""A post-mortem's or a summary's heading (``Summarizing the ENOSPC aftermath on Friday:``, ``Timeline:``):
the list under it recounts an incident after the fact, its items report nothing the run printed."""
_FENCE = re.compile(r"^\s{0,8}(?:```|~~~)")
"""A Markdown code fence, opening or closing a block."""
_ANNOTATED = re.compile(r"\S {1,40}(?:\u2190|\u27f5|<--) {0,4}\S")
"""A writer's annotation on a line of output (``Exit Code: 137   ← 128 + 9``): the block it is in is a page's
annotated example, not the run's output."""
_CJK_QUOTING = re.compile(
    r"[\u3040-\u30ff\u4e00-\u9fff][^\n\"\u201c\u300c]{0,200}[\"\u201c\u300c][^\"\u201d\u300d\n]{1,300}"
    r"[\"\u201d\u300d][^\n\u3040-\u30ff\u4e00-\u9fff]{0,8}[\u3040-\u30ff\u4e00-\u9fff]"
)
"""A sentence in a language written without spaces quoting an error's message as a noun inside it, words
before and after the quote (``解决训练时的 "CUDA out of memory" 错误``): a page's title or its account, not a
program's line (a report quoting it last, ``遇到“…”``, is read by :func:`reported`)."""


_TITLE = re.compile(
    r"^\s{0,8}(?:\[[\w/ .-]{1,40}\]:? {1,2})?"
    r"(?:[Hh]ow (?:to|do I|can I) (?:fix|solve|handle|avoid|resolve|debug)\b"
    # an imperative naming the error as the work to do (``[python] Handle torch.cuda.OutOfMemoryError``,
    # ``Catch …``, ``Retry on …``): a program reports what happened, it does not ask for it to be handled
    r"|(?:[Hh]andle|[Cc]atch|[Rr]etry on|[Rr]ecover from|[Gg]racefully handle) (?:an? |the )?"
    r"(?:[\w.]{1,120}\.)?[A-Z]\w{0,80}(?:Error|Exception)\b"
    r"|[^\n\"'`]{0,200}[\"'`][^\"'`\n]{1,200}[\"'`] "
    r"(?:should (?:be (?:handled|caught|retried|reported)|not (?:crash|fail)))\b)"
)
"""A title that names an error as its topic (``[tune] "No space left on device" should be handled``,
``How to fix …``, ``Handle …Error``), however it is prefixed: a thread's, not a program's line."""
_DESCRIBED = re.compile(
    r"^\s{0,8}(?:[\w.]{1,120}\.)?[A-Z]\w{0,80}(?:Error|Exception)\b(?:"
    # a reference page's sentence on the class, in a language written without spaces (``…Error 表示 …``,
    # ``…Error は …``), or in English (``RendezvousConnectionError indicates that …``): Python prints the
    # class with a colon and its message, or alone
    r"\s{0,4}[\u3040-\u30ff\u4e00-\u9fff]"
    r"| (?:means|indicates|signals|denotes|is raised|is thrown|occurs|happens)\b"
    # a page's opening sentence with the error's message as its subject (``torch.cuda.OutOfMemoryError: CUDA
    # out of memory is one of those errors that lies to you``, ``… is an error that …``)
    r"|[^\n]{0,200}? (?:is|are) (?:one of (?:those|the)\b"
    r"|an? (?:[\w-]{1,30} ){0,3}(?:error|exception|failure)s? (?:that|which|you)\b))"
)
"""An exception's class, or its message after it, as the subject of a sentence that describes it: a page's
account of the error, whatever program's format its first words have."""
_EXPLAINS_ABOVE = re.compile(
    r"^\s{0,8}(?:This|The above|That) (?:error|exception|message|failure)(?: message)? "
    r"(?:usually |typically |often |generally )?"
    r"(?:means|indicates|is (?:usually |typically |often )?(?:caused by|due to)|occurs when|is raised when"
    r"|is thrown when)\b"
    r"|^\s{0,8}(?:该|此|这个|这类|上述|以上)(?:报错|错误|异常|故障)(?:信息)?"
    r"(?:为|是|表示|说明|意味着|通常|一般|由于|是由|的原因)"
)
"""An answer's first words explaining the error the lines above it quote (a FAQ's question
``训练时报“…”``, then ``该报错为HCCL通讯时间超时…``; ``This error means …``): the block it ends is the page's
question and answer, the quoted error its example."""
_SURMISED = re.compile(
    r"^\s{0,8}(?:It (?:looks|seems) (?:like|as if|as though)|It seems(?: that)?|It appears(?: that)?"
    r"|Apparently|Presumably|My guess is)\b[^\n`]{0,300}`"
)
"""A writer's surmise about what a program does on an error, the error quoted in inline code after it (``It
looks like tensorflow makes the training script exit with 0 on an `Connection reset by peer` ``, ``It seems as
though some `MPI_Aborts` … don't return a non-zero exit code``): a pull request's or a comment's theory, not a
report of a run (Open MPI's own ``It looks like MPI_INIT failed …`` quotes no code)."""
_NOTED = re.compile(
    r"^\s{0,8}(?:[>*_]{1,3} ?)?(?:Note|NOTE|Tip|TIP|Hint|Caution)(?:[*_]{1,2})?:(?:[*_]{1,2})? {1,3}"
    r"(?:[Ii]f|[Ww]hen(?:ever)?|[Ii]n case|[Uu]nless|[Oo]nce)\b[^\n]{0,200}?"
    r"\b(?:will|would|may|might|can|could)(?: (?:also|then|still))? \w"
)
"""A document's note on what a program does under a condition (``Note: if there are no partitions active,
gc-monitor will core dump: `Segmentation fault (core dumped)` ``, ``Tip: when the disk fills up, pip may
print …``): an admonition's hypothetical, its ``Note:`` no program's ``name: `` prefix."""
_QUOTED_LOCATION = re.compile(r"`[\w/\\.-]{1,200}\.(?:c|cc|cpp|cu|cuh|h|hpp|py|go|rs|java):\d{1,6}`")
"""A source file and line alone in inline code (``in `gloo/transport/tcp/pair.cc:563` ``): the writer's
pointer to where a message comes from, not the program's format (a message quoted whole with its location
stays one)."""
_SENTENCE_SPAN = re.compile(r"^\s{0,8}[A-Za-z][\w',]{0,30} [^`\n]{0,200}`[^`\n]{1,400}` ")
"""A sentence's words, then inline code inside it, then more words: the code is quoted, not the line's
format."""
_INLINE_SPAN = re.compile(r"`[^`\n]{1,400}`")
_BARE_CLASS = re.compile(r"^\s{0,8}(?P<name>[A-Z][A-Za-z]{1,80}(?:Error|Exception))\s{0,8}$")
"""A line that is an exception class's name alone, unqualified, with no message. Python prints a raised
exception's class qualified by its module (``torch.distributed.elastic.rendezvous.api.…Error: …``)
unless it is a built-in one (``MemoryError``): a library's class named bare is a thread's topic (its
title) or a person's word, not what the run printed."""


_WRITTEN = re.compile(
    r"^\s{0,8}(?:[|>]\s{0,4})?(?:"
    # source code giving an error's text: a C/C++/Go/Python statement returning or raising a literal, a
    # ``case`` of a switch over error codes (c10d's table of NCCL's error strings, pasted from a diff view)
    r"(?:return|case|throw|raise) [^\n]{0,300}?[;:]\s{0,4}\|?\s{0,4}$"
    # C/C++ source commented out (``//   if (ne < 0) {``, ``// printf("ibv_poll_cq() failed …");``), and a
    # print statement giving an error's text as its format (``fprintf(stderr, "… failed: %d\n", ne);``)
    r"|//\s{0,16}(?:if \(|while \(|for \(|return\b|[A-Za-z_][\w.>-]{0,80}\()"
    r"|(?:f|s|sn|v|vf)?printf\s{0,2}\((?:\s{0,4}std(?:err|out),)?\s{0,4}\"[^\n]{0,300}?%"
    # a test's description assigned as a shell or Python variable (``test_description='… ENOSPC …'``)
    r"|\w{1,60}_description\s{0,2}=\s{0,2}[\"']"
    # a reference table's row in markdown: an error code's or class's name in its first cell, the row closed
    # by its pipe (``| SQLITE_FULL | 13 | database or disk is full |``)
    r"|`?(?:[A-Z][A-Z0-9]{1,20}_[A-Z0-9_]{1,40}|[A-Z]\w{1,80}(?:Error|Exception))`?\s{0,4}\|[^\n]{1,400}\|\s{0,4}$"
    # a patch's mail header naming what it changes (``Subject: [PATCH] Provide ETIMEDOUT as …``)
    r"|Subject: \[PATCH\b"
    # a class defined, as source or a documentation page's view of it shows it (``[docs]class
    # RendezvousTimeoutError(RendezvousError):``), and a docstring opening under it (``"""Raised when …``)
    r"|(?:\[(?:docs|source)\]\s{0,2})?class [A-Za-z_]\w{0,80}(?:\([^)\n]{0,200}\))?:\s{0,4}$"
    r"|\"{3}|'{3}"
    # a setting explained by its name, as documentation does (``HCCL_EXEC_TIMEOUT sets how long an hccl task
    # may wait before …``, ``NCCL_TIMEOUT controls the …``)
    r"|[A-Z][A-Z0-9]{1,20}_[A-Z0-9_]{1,60} (?:sets|controls|defines|specifies|determines) "
    r"(?:how|the|whether|when)\b"
    r")"
)
"""A line written, not printed: source code returning, raising or printing an error's text (or commented
out), a test's description,
a patch's subject, a setting explained by its name, a class defined and its docstring. A program's output
is none of these."""


def _named_bare(text: str) -> bool:
    """Whether ``text`` is a library's exception class named alone (:data:`_BARE_CLASS`)."""
    match = _BARE_CLASS.match(text)
    return match is not None and not isinstance(getattr(builtins, match["name"], None), type)


_REPORTED = re.compile(
    r"\b(?:gave|gives|threw|throws|raised|raises|printed|prints|showed|shows|got|get|getting"
    r"|fails with|failed with) (?:me |us )?"
    r"(?:an? |the |this )?(?:error|exception)(?: message)?: (?P<quote>\S[^\n]{4,300})$"
    # the report's own label before the line it pastes (``Error info: [pid] signal (11): …``, ``Error
    # message: …``), not after a condition or advice
    r"|(?<![Ii]f )(?<![Ww]hen )\b(?:[Ee]rror|[Cc]rash) (?:info|message|output|log): {1,4}"
    r"(?P<quote2>\S[^\n]{4,300})$"
    # the writer's own run, what it printed pasted after a colon at the end of the sentence (``… and then
    # click 'load', I get: ……Segmentation fault (core dumped)``, ``we got: …``): the first person, not the
    # reader's (``you get:`` is a page's example)
    r"|\b(?:I|[Ww]e) (?:get|got|see|saw|am getting|keep getting|still get|then get)(?: this| the following)?"
    r"(?: output| error)?: {1,4}(?P<quote12>\S[^\n]{4,600})$"
)
"""A person's report of what a program printed, quoting it at the end of the sentence (``… would not
save the file and gave me an error: [Errno 28] No space left on device``, ``the controller fails with error:
`…` ``)."""


_REPORTED_NAMED = re.compile(
    r"\b(?:encountered|ran into|got) (?:an? |the )?"
    r"(?P<quote>(?:[\w.]{1,120}\.)?[A-Z][A-Za-z]{1,80}(?:Error|Exception)\b[^\n]{0,300})$"
)
"""A person's report naming the error class the run raised (``I encountered RendezvousTimeoutError when
using 2 nodes``), in the past tense — what happened, not what would (``You'll get …``): the class and
what follows is the run's."""
_REPORTED_QUOTED = re.compile(
    r"\b(?:run|ran|running) into (?:an? |the )?(?:[\w-]{1,30} ){0,3}?(?:error|exit|exception|failure)s?:? "
    r"(?P<q>\"|`{1,3}|')(?P<quote>[^\"`'\n]{4,300})(?P=q)"
    r"|(?P<p>`{1,3}|\")(?P<quote2>[^\"`\n]{4,300})(?P=p) (?:is|was|gets|got) "
    r"(?:prompted|printed|shown|reported)\b"
    # a program named as the teller, what it showed quoted after (``The `dmesg` shows `NVRM: Xid …```)
    r"|\b(?:shows|showed|printed|prints|reported|reports|gave|gives)(?: me| us)?:? "
    r"(?P<r>`{1,3}|\")(?P<quote3>[^\"`\n]{4,300})(?P=r)"
    # what the run did ended in the line quoted in code (``running a larger batch leads to `CUDA error: …```),
    # a report where no hint makes it a hypothetical (``may lead to``)
    r"|\b(?:leads|led|lead) to (?P<s>`{1,3})(?P<quote4>[^`\n]{4,300})(?P=s)"
    r"|\b(?:results|resulted) in (?P<t>`{1,3})(?P<quote5>[^`\n]{4,300})(?P=t)"
    # the run named as raising what is quoted after (``… and it raise an error "RuntimeError: …"``, ``it
    # threw an exception `…` ``)
    r"|\b(?:raise[sd]?|thr(?:ew|ows?)) (?:an? |the |this )?(?:error|exception)s?:? "
    r"(?P<u>`{1,3}|\")(?P<quote6>[^\"`\n]{4,300})(?P=u)"
    # what the run hit told as there being, or someone having, an issue of the quoted words (``there is an
    # issue of "…"``, ``we had the problem "…"``, ``I got this error: "…"``), in the present or the past;
    # not a condition (``if there is …``)
    r"|\b(?<![Ii]f )(?<![Ww]hen )(?<![Ww]henever )(?<![Uu]nless )"
    r"(?:there (?:is|was)|(?:I|we) (?:have|had|hit|got|get|see|saw)) (?:an? |the |this )"
    r"(?:issue|problem|error|failure)(?: of| saying)?:? (?P<v>`{1,3}|\")(?P<quote7>[^\"`\n]{4,600})(?P=v)"
    # the writer's own experience of it, the quote in code or quotes, single ones too (``I'm getting
    # `…` when``, ``we keep seeing '…'``, ``I faced a strange error "…"``, ``I always encounter the problem
    # of '…'``), not after a condition
    r"|\b(?<![Ii]f )(?<![Ww]hen )(?:I|[Ww]e)(?:'m|'re| am| are)? (?:always |still |keep |repeatedly )?"
    r"(?:got|get|getting|faced?|facing|encounter(?:ed|ing)?|hit|receive[ds]?|receiving|see|saw|seeing) "
    r"(?:(?:an?|the|this|a weird|a strange|an odd) (?:issue|problem|error|exception|failure)(?: of)?:? )?"
    r"(?P<w>`{1,3}|\"|')(?P<quote8>[^\"`'\n]{4,600})(?P=w)"
    # a message said to say it (``there exists an error which says "…"``, ``a message that reads `…` ``)
    r"|\b(?:error|message|exception|failure) (?:which|that) (?:says|said|reads|read) "
    r"(?P<x>`{1,3}|\")(?P<quote9>[^\"`\n]{4,600})(?P=x)"
    # the error named as what came about, quoted between the word and its verb (``However, error "…"
    # happens.``, ``the exception `…` occurred``, ``error '…' shows up``), in the past or the present; not the
    # generic account of when it does (``… happens when …``)
    r"|(?<![Ii]f )(?<![Ii]f the )(?<![Ii]f an )(?<![Ww]hen )(?<![Ww]hen the )(?<![Ww]hen an )"
    r"\b(?:error|exception|failure|problem|issue) (?P<y>`{1,3}|\"|')(?P<quote11>[^\"`'\n]{4,600})(?P=y) "
    r"(?:happens|happened|occurs|occurred|appears|appeared|shows up|showed up|comes up|came up|pops up"
    r"|popped up|is raised|was raised|is thrown|was thrown)\b(?! (?:when|if|whenever)\b)"
    # the same report in Chinese: met (遇到), with the error in full-width quotes (``遇到“…”的问题``)
    r"|遇到\s{0,2}[\u201c「](?P<quote10>[^\u201d」\n]{4,600})[\u201d」]"
)
"""A person's report quoting the run's line in quotes or code (``I run into an uninformative exit
"exits with return code = -9"``, ``In the end, `exits with return code = -11` is prompted.``, ``the
kernel log showed `…` ``, ``a larger batch leads to `…` ``, ``it raise an error "…"``)."""


_QUOTES = (
    "quote", "quote2", "quote3", "quote4", "quote5", "quote6", "quote7", "quote8", "quote9", "quote10",
    "quote11", "quote12",
)  # fmt: skip


def reported(line: str) -> str | None:
    """The program's output a sentence of prose reports it printed (the quote after ``gave me an
    error:``, an error class someone ``encountered``, a quoted line that ``is prompted``), where the
    sentence is no hint (``if you get an error: …``); else ``None``."""
    for pattern in (_REPORTED, _REPORTED_NAMED, _REPORTED_QUOTED):
        match = pattern.search(line)
        if match is None:
            continue
        group = next(g for g in _QUOTES if g in match.re.groupindex and match[g])
        if is_hint(line[: match.start(group)]):
            return None
        return match.group(group)
    return None


_HELP_DASHES = re.compile(r"^-{20,200}\s{0,8}$")
_HELP_HEADLINE = re.compile(
    r"\b(?:mpirun|mpiexec|orterun|prterun) has exited due to process rank \d"
    r"|\bAn MPI communication peer process has unexpectedly disconnected\b"
    # the init failures' (PMIx's, Open MPI's runtime, ORTE's, OPAL's), ``your parallel process is likely to
    # abort`` after it
    r"|\bIt looks like (?:pmix_init|MPI runtime init|orte_init|opal_init|ompi_rte_init|MPI_INIT) failed "
    r"for some reason\b"
)
"""The opening sentence of an Open MPI help text, where the log lost its dashed lines (a CI's timestamped
copy, a paste of the text alone): the lines under it, to the next blank line, are the program's too."""


@lru_cache(maxsize=1024)
def prose(lines: tuple[str, ...]) -> frozenset[int]:
    """The lines that are prose about an error, not a program's message: documentation, a help page,
    an answer or a comment — written in a person's register (:data:`_DISCOURSE`) or a document's
    markup (:data:`_MARKUP`) with no program's format (:data:`_PRINTED`), and the example lines a
    sentence introduces (``You will see it from almost any program that writes:``, ``You will get error
    if …:``, ``Expected output:``) up to the next blank line; an API reference's entry (:data:`_API_HEADER`)
    and everything under it; a guide's section listing the failures it is for (:data:`_GUIDE_SECTION`) and
    its list items; a FAQ's question down to the answer that explains it (:data:`_EXPLAINS_ABOVE`); a
    troubleshooting step's words on what to look for (:data:`_LOOK_FOR`). Open MPI's help texts between
    dashed lines (or under their opening sentence, to a blank line: :data:`_HELP_HEADLINE`) are a program's,
    however they read."""
    told: set[int] = _annotated(lines) | _answered(lines)
    in_help = False
    examples = headed = documented = listed = fenced = introduced = False
    for i, text in enumerate(lines):
        if fenced:
            told.add(i)  # an example in a code fence under the sentence that introduces it, to its close
            fenced = _FENCE.match(text) is None
            examples = fenced
            continue
        if examples and _FENCE.match(text):
            told.add(i)
            fenced = True
            continue
        if documented or _API_HEADER.match(text):
            told.add(i)  # an API reference's entry and its documentation under it, to the end
            documented = True
            continue
        if _GUIDE_SECTION.match(text) or _SUMMARY.match(text):
            told.add(i)
            listed = True
            continue
        if listed and (not text.strip() or _LIST_ITEM.match(text)):
            told.add(i)  # a guide's list of the failures it is for, and the examples an item introduces
            examples = introduced = _EXAMPLES.search(text) is not None
            continue
        listed = False
        if _HELP_DASHES.match(text):
            in_help = not in_help
            examples = False
            continue
        if not text.strip():
            # the introducing sentence's example may stand one blank line below it
            examples = examples and introduced
            headed = introduced = False
            continue
        if _HELP_HEADLINE.search(text):
            headed = True
        if examples:
            told.add(i)
            introduced = False
            continue
        if not in_help and (
            _TITLE.match(text)
            or _named_bare(text)
            or _WRITTEN.match(text)
            or _DESCRIBED.match(text)
            or _SURMISED.match(text)
            or _NOTED.match(text)
            or _CJK_QUOTING.search(text)
        ):
            told.add(i)
            continue
        if in_help or headed or _printed(text):
            continue
        markup = _MARKUP.search(text)
        introduces = _EXAMPLES.search(text) is not None
        if introduces or _DISCOURSE.search(text) or (markup is not None and _explains(text)):
            told.add(i)
            examples = introduced = introduces
    return frozenset(told | _diff(lines))


def _answered(lines: tuple[str, ...]) -> set[int]:
    """The lines of every block (lines between blank ones) down to a line that explains the error quoted above
    it (:data:`_EXPLAINS_ABOVE`): a FAQ's question and its answer."""
    told: set[int] = set()
    start = 0
    for i, text in enumerate(lines):
        if not text.strip():
            start = i + 1
        elif _EXPLAINS_ABOVE.match(text):
            told.update(range(start, i + 1))
    return told


def _annotated(lines: tuple[str, ...]) -> set[int]:
    """The lines of every block (lines between blank ones) where one line carries a writer's annotation
    (:data:`_ANNOTATED`): a page's annotated example."""
    told: set[int] = set()
    start = 0
    for end in [*(i for i, text in enumerate(lines) if not text.strip()), len(lines)]:
        if any(_ANNOTATED.search(lines[i]) for i in range(start, end)):
            told.update(range(start, end))
        start = end + 1
    return told


_DIFF_LINE = re.compile(r"^[-+](?=[A-Za-z\[])")
_ADDED = re.compile(r"^\+(?!\+)")
"""A line a unified diff removes or adds (``-ORTE has lost…``, ``+ORTE has lost…``): not a shell trace's
``+ cmd`` (a space after the sign), nor dashes."""
_HUNK = re.compile(r"^@@ -\d{1,9}(?:,\d{1,9})? \+\d{1,9}(?:,\d{1,9})? @@")


def _diff(lines: tuple[str, ...]) -> set[int]:
    """The lines of a diff (a patch of a program's help text or source, pasted in a pull request): where
    a removed line meets an added one, or a hunk header opens them, the signed lines of the tail are the
    patch's text, not the program's output."""
    signed = [i for i, text in enumerate(lines) if _DIFF_LINE.match(text)]
    paired = any(
        lines[i][0] == "-"
        and i + 1 < len(lines)
        and lines[i + 1][:1] == "+"
        and _DIFF_LINE.match(lines[i + 1])
        for i in signed
    )
    if paired or any(_HUNK.match(text) for text in lines):
        return set(signed)
    return _added(lines)


def _added(lines: tuple[str, ...]) -> set[int]:
    """The lines of a diff's added side alone (a pull request's documentation quoting an error): a tail
    whose every line starts with ``+`` (the added blank line a bare ``+``, a quote ``+>``, indented code
    ``+   E0929 …``), two lines or more. A program's output never signs every line; a shell trace's
    ``+ cmd`` lines are commands, not what they printed."""
    written = [i for i, text in enumerate(lines) if text.strip()]
    if len(written) < 2 or not all(_ADDED.match(lines[i]) for i in written):
        return set()
    return set(written)


def _printed(text: str) -> bool:
    """Whether ``text`` has a program's format (:data:`_PRINTED`) besides a source location a sentence quotes
    alone (:data:`_QUOTED_LOCATION`; a line that is one code span whole is a program's line pasted)."""
    if _PRINTED.search(text) is None:
        return False
    if _WHOLE_SPAN.match(text) is not None or _RUST_UNWRAP.search(text) is not None:
        return True
    if _SENTENCE_SPAN.match(text) is not None:
        # a program's words quoted in inline code inside a sentence (``I see the `NCCL WARN …` happening
        # …``): the sentence's format is the writer's
        return _PRINTED.search(_INLINE_SPAN.sub("``", text)) is not None
    return _PRINTED.search(_QUOTED_LOCATION.sub("``", text)) is not None


def _explains(text: str) -> bool:
    """Whether markup marks a line as a document's: an explained list item, or inline code and words (not
    a line that is one code span whole, a program's line pasted as inline code)."""
    if _WHOLE_SPAN.match(text) is not None:
        return False
    return _EXPLAINED_ITEM.search(text) is not None or ("`" in text and len(text.split()) >= 6)


_WHOLE_SPAN = re.compile(r"^\s{0,8}`[^`\n]{1,400}`\s{0,4}$")
"""A line that is one inline code span from its first character to its last (a ``kubectl describe`` event
row pasted between backticks): what a program printed, quoted whole, with no words of the writer's."""


# ------------------------------------------------------------------ output tags

_RANK_TAGS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\[rank(\d{1,7})\]:"),  # torchrun --tee / log prefixes
    re.compile(r"^\s{0,8}\[\d{1,7},(\d{1,7})\]<std(?:out|err)>:"),  # mpirun --tag-output
    re.compile(r"^\s{0,8}\[(\d{1,5})\]\s"),  # MPICH / Intel MPI -prepend-rank
)
_TAG = re.compile(r"^\s{0,8}(?:\[\d{1,7},\d{1,7}\]<std(?:out|err)>:|\[rank\d{1,7}\]: ?)")


def output_rank(line: str) -> int | None:
    """The rank an output tag attributes ``line`` to, if any."""
    head = line[:128]
    for pattern in _RANK_TAGS:
        match = pattern.search(head)
        if match is not None:
            return int(match.group(1))
    return None


def strip_tag(line: str) -> str:
    """``line`` without mpirun's or torchrun's output tag."""
    match = _TAG.match(line)
    return line[match.end() :] if match is not None else line


# ------------------------------------------------------------- mentions, handled

_HINT = re.compile(
    r"\b(?:may|might|can|could|will|would)(?: likely)? (?:cause|lead to|result in|trigger)\b|\b[Tt]o avoid\b"
    r"|\b[Ii]f you (?:see|get|hit|encounter)\b"
    r"|\b[Ww]ill warn\b|\b[Ww]arns? (?:on|when|if|about)\b|\b(?:TIP|HINT|Tip|Hint):"
    r"|\b(?:usually|often|typically) (?:comes? from|means|indicates|is caused by|happens)\b"
    r"|\b(?:[Pp]reviously|used to) (?:crash|fail|die|abort)\w{0,2} with\b"
    r"|\b(?:just|only|simply) (?:says|prints|reports)\b"
    r"|\b(?:[Cc]atch(?:es|ing)|[Rr]ecover(?:s|ing) from|[Hh]andl(?:es|ing)) (?:the |an? |any )?[`'\"]?$"
    r"|\b(?:[Rr]un|[Uu]se|[Ff]ollow|[Aa]pply) this(?: (?:runbook|playbook|procedure|page|guide|check))? "
    r"(?:when|if|whenever)\b"
    rf"|{_LOOK_FOR}|{_EXPECTED}"
)


def is_hint(line: str) -> bool:
    """Whether ``line`` advises about a failure rather than reports one: a help text, a tip, a
    configuration echo set *to avoid* it, a helper saying it *will warn on* it, a handler that *catches*
    it, a runbook's instruction for when it happens (``Use this playbook when …``)."""
    return _HINT.search(line) is not None


_EXPLAINED = re.compile(
    r"^[\"'`]?(?: {1,2}(?:errors?|failures?|issues?|problems?|exceptions?)\b"
    r"|[^.;]{0,40}?\b(?:often|usually|typically|commonly|mostly|frequently) (?:results? from|comes? from"
    r"|stems? from|is caused by|are caused by|occurs?|happens?|means)\b)"
)


_COUNT_BEFORE = re.compile(r"^\s{0,8}(?:[-*\u2022|]\s{0,4})?\d{1,9}[x\u00d7]?\s{1,3}[\"'`]?$")
"""A count that starts a summary's row before an error's name (``- 0 RendezvousClosedError``)."""
_COUNT_AFTER = re.compile(r"^[\"'`]?s?\s{0,4}(?:[:=|]|\bx\b)\s{0,4}\d{1,9}\s{0,4}\|?\s{0,4}$")
"""A count that ends a summary's or a table's row after an error's name (``| RendezvousTimeoutError |
0 |``)."""


_ROW_START = re.compile(r"^\s{0,8}(?:\|\s{0,4})?[\"'`*]{0,2}$")
"""A table row's start, up to its first cell (a markdown pipe or none)."""
_MEANING_AFTER = re.compile(
    r"^[\"'`*]{0,2}\s{0,4}\|\s{0,4}(?!\d)[A-Za-z(][\w'(),-]{0,40}(?: [\w'(),.-]{1,40}){3}"
)
"""An error's name in a table row's first cell, what it means in the next: a cell of words after the pipe
(``RendezvousConnectionError | One or more nodes fail to connect to …``): a reference table's, not a log's."""


def is_mention(line: str, start: int, end: int | None = None) -> bool:
    """Whether the failure words found at ``line[start:end]`` are only named: by advice before them
    (``to avoid 'CUDA out of memory'``, ``will warn on 'No space left on device'``), as the subject
    of an explanation after them (``"CUDA out of memory" failures are…``, ``… often results from
    fragmentation``), or counted in a summary's row (``- 0 RendezvousClosedError``, ``| … | 3 |``).
    A message that reports the failure and then advises (PyTorch's own ``… to avoid
    fragmentation``) is no mention."""
    if is_hint(line[:start]) or _COUNT_BEFORE.match(line[:start]) is not None:
        return True
    if end is not None and _EXPLAINED.search(line[end:]) is not None and not _CAUSED.search(line[:start]):
        return True
    name = _NAME_AT.match(line, start)
    if name is None:
        return False
    after = line[name.end() :]
    if _ROW_START.match(line[:start]) is not None and _MEANING_AFTER.match(after) is not None:
        return True  # a table of error names and their meanings
    return _COUNT_AFTER.match(after) is not None


_CAUSED = re.compile(r"\b(?:causing|caused|causes) (?:an? |the )?[\"'`]$")
"""What happened named as the cause of the quoted error (``Logs fill up disk space causing a "No space
left on device" error``): the error is reported, not named (a hint before it, ``may cause``, still makes
a mention)."""
_NAME_AT = re.compile(r"[\w.]{1,120}")
"""The word (an error's name) that starts where a failure was found, when its end is not given."""


_HANDLED_HERE = re.compile(
    r"Exception ignored|[Rr]etrying|[Ww]ill retry|[Ii]gnoring|[Rr]ecovered"
    r"|[Ss]kipp(?:ing|ed) (?:this |the )?(?:batch|step|sample|iteration)"
    r"|[Ff]all(?:ing|s) back\b|[Ff]allback to\b|will operate in serial mode|[Cc]ontinuing without\b"
)
_HANDLED_AFTER = re.compile(
    r"[Tt]rying (?:a )?(?:smaller |lower )?batch[ _]size|[Rr]educ(?:ing|ed) (?:the )?batch[ _]size"
    r"|[Hh]alv(?:es|ed|ing) (?:the )?`?batch(?:[ _]size)?`?|[Cc]hosen batch[ _]size"
    r"|(?:[Rr]etr(?:y|ies|ying)|[Rr]estart(?:s|ing)?) (?:\w{1,12} ){0,3}with a smaller batch\b"
    r"|[Ff]ound (?:optimal|max(?:imum)?) batch[ _]size"
    r"|[Bb]atch[ _]size (?:set to|reduced to|chosen)\b|[Rr]etrying with\b"
)
HANDLED_WITHIN = 3
"""How many lines after an error the program's handling of it may come."""


_RESULTS_ROW = re.compile(
    r"^\s{0,8}(?=[\d. ]{0,200}\d\.\d)\d[\d.]{0,20}(?:\s{1,40}\d[\d.]{0,20}){1,20}\s{0,8}$"
)
"""A row of a results table: numbers only, a measurement among them (a benchmark's ``1    0.23``; not
a hex dump's ``00000000 00000000``)."""


_COUNTER = re.compile(
    r"\b(?P<word>[Ee]poch|EPOCH|[Ss]tep|STEP|[Ii]teration|ITERATION|[Ii]ter|ITER)\b:?\s{0,3}[=#]?\s{0,3}"
    r"(?P<n>\d{1,12})\b(?!\s{0,2}/)"
)
"""A training loop's counter on a progress line (``Train Epoch: 1516 [5%]``, ``epoch 3 step 200``), not a
total (``Epoch 3/10``'s second number; the first is read only where no ``/`` follows it)."""


def _counters(line: str) -> dict[str, int]:
    return {m["word"].lower(): int(m["n"]) for m in _COUNTER.finditer(line)}


def _advanced(lines: Sequence[str], index: int) -> bool:
    """Whether a counter of the training loop printed after ``lines[index]`` passed the one printed before it
    (``Train Epoch: 1515`` above the error, ``Train Epoch: 1516`` below): the loop went on past the error."""
    before: dict[str, int] = {}
    for line in lines[max(0, index - _CONTEXT_LINES) : index + 1]:
        before.update(_counters(line))
    if not before:
        return False
    return any(
        word in before and n > before[word]
        for line in lines[index + 1 : index + 1 + _CONTEXT_LINES]
        for word, n in _counters(line).items()
    )


def went_on(lines: Sequence[str], index: int) -> bool:
    """Whether the run went on past the error on ``lines[index]``: to print its results (a row of numbers
    after it: a transport the library gave up for another, then the benchmark's table), or to train on (a
    counter of its loop, an epoch or a step, passing the one printed before the error)."""
    return any(_RESULTS_ROW.match(line) for line in lines[index + 1 :]) or _advanced(lines, index)


def handled(lines: Sequence[str], index: int) -> bool:
    """Whether the error on ``lines[index]`` was caught and handled: the line says so (skipped the
    batch, fell back, retried), or one of the next lines does (or goes on searching a batch size),
    or the run went on to print its results (:func:`went_on`)."""
    if _HANDLED_HERE.search(lines[index]) or went_on(lines, index):
        return True
    return any(
        _HANDLED_HERE.search(line) or _HANDLED_AFTER.search(line)
        for line in lines[index + 1 : index + 1 + HANDLED_WITHIN]
    )


# ------------------------------------------------------------------ GPU memory

MPS_OOM = "GPU out of memory (PyTorch's MPS backend on Apple silicon)"
# (what ran out, in the user's words; the wording of the stack that says it)
CUPY_OOM = "GPU out of memory (CuPy's memory pool could not allocate the array)"
"""What CuPy's allocator running out is said as (Chainer's arrays and CuPy's own)."""
ROCCLR_OOM = "GPU out of memory (ROCm's runtime, ROCclr: its device memory allocation failed)"
"""What ROCm's common runtime (HIP's and OpenCL's ROCclr, its AMD_LOG_LEVEL lines) running out is said as."""
MIOPEN_OOM = "GPU out of memory (MIOpen could not allocate its buffer)"
PADDLE_BADALLOC_OOM = "GPU out of memory (PaddlePaddle's allocator threw BadAlloc)"
PADDLE_RESERVE_OOM = (
    "GPU out of memory (PaddlePaddle: the GPU's free memory is less than the share it reserves, "
    "FLAGS_fraction_of_gpu_memory_to_use; another process holds the rest)"
)
THEANO_OOM = "GPU out of memory (Theano could not allocate device memory)"
CAFFE_OOM = "GPU out of memory (Caffe's CUDA_CHECK: a CUDA call returned cudaErrorMemoryAllocation)"
"""What Caffe's (and its forks') glog check on a CUDA call's status says when the call ran out of memory."""
VULKAN_OOM = "GPU out of memory (Vulkan: the device memory allocation failed, ErrorOutOfDeviceMemory)"
"""What a Vulkan back end (ggml's, llama.cpp's, ncnn's) refused device memory is said as."""
JULIA_GPU_OOM = "GPU out of memory (Julia: CUDA.jl's OutOfGPUMemoryError, or Knet's allocator)"
"""What Julia's GPU packages running out of device memory is said as."""
CHECKED_CALL_OOM = "GPU out of memory (a CUDA call a library checked, XGBoost's safe_cuda or thrust's)"
"""What a library's check of a CUDA call (its file and line, then the runtime's ``out of memory``) is said
as."""
FRACTION_OOM = "GPU out of memory (PyTorch: over the memory fraction the process was allowed)"
"""What PyTorch's caching allocator refusing a block over ``set_per_process_memory_fraction`` is said as."""
LEVEL_ZERO_OOM = "Intel GPU out of memory (Level Zero / SYCL: the device allocation was refused)"
TF_INIT_OOM = "GPU out of memory (TensorFlow could not create its CUDA context: the GPU's memory was taken)"
"""What TensorFlow 1.x's CUDA context failing on a GPU another process fills is said as."""
GPU_OOM_SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (  # PyTorch's MPS backend on Apple silicon, over its watermark of the unified memory (``MPS backend out
        # of memory (MPS allocated: 1.2 GB, other allocations: …, max allowed: …). Tried to allocate …``);
        # first, as newer releases raise it as torch.OutOfMemoryError
        MPS_OOM,
        re.compile(r"\bMPS backend out of memory \(MPS allocated: \d"),
    ),
    (  # ROCm's wordings, before CUDA's (PyTorch on ROCm raises torch.OutOfMemoryError too, ``HIP out of
        # memory`` after it): PyTorch's, HIP's error name, and HIP's driver status as TensorFlow's and XLA's
        # stream executor relay it (``failed to allocate 1.2G (… bytes) from device: HIP_ERROR_OutOfMemory``)
        "GPU out of memory (ROCm: HIP out of memory)",
        # HIP's status by number where a stream executor prints it (``hipError_t(1002)``,
        # hipErrorMemoryAllocation in ROCm's first releases; ``hipError_t(2)``, hipErrorOutOfMemory since)
        re.compile(
            r"HIP out of memory|hipErrorOutOfMemory|\bHIP_ERROR_OutOfMemory\b|hipErrorMemoryAllocation"
            r"|failed to allocate [^\n]{1,80} from device: hipError_t\((?:1002|2)\)"
        ),
    ),
    (  # PyTorch's caching allocator on another accelerator: Intel's XPU (IPEX, torch.xpu), Ascend's NPU;
        # before CUDA's, as newer releases raise it as torch.OutOfMemoryError too
        "accelerator out of memory (PyTorch's XPU / NPU allocator)",
        re.compile(r"\b(?:XPU|NPU) out of memory\. Tried to allocate\b"),
    ),
    (  # Intel's GPU runtimes below PyTorch: Level Zero's and the unified runtime's status for a device
        # allocation refused (``level_zero backend failed with error: 70000004
        # (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)``),
        # and SYCL's plugin interface on IPEX (``Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES)``)
        LEVEL_ZERO_OOM,
        re.compile(
            r"\b(?:UR|ZE)_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\b"
            r"|Native API returns: -5 \(PI_ERROR_OUT_OF_RESOURCES\)"
        ),
    ),
    (  # TensorFlow 1.x creating its CUDA context on a GPU whose memory another process holds
        TF_INIT_OOM,
        re.compile(r"CUDA runtime implicit initialization on GPU:\d{1,3} failed\. Status: out of memory"),
    ),
    (
        "CUDA out of memory",
        re.compile(
            r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory"
            r"|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
            # PyTorch 0.4-1.x's THC checks (``cuda runtime error (2) : out of memory at …``,
            # ``THCudaCheck FAIL file=… line=… error=2 : out of memory``)
            r"|\bcuda runtime error \(2\) : out of memory\b"
            r"|THCudaCheck FAIL [^\n]{0,300}?error=2 : out of memory"
        ),
    ),
    (  # Julia's GPU packages: CUDA.jl's OutOfGPUMemoryError (its showerror: ``Out of GPU memory trying to
        # allocate 1.5 GiB``, then ``Effective GPU memory usage: …``), CUDA.jl's driver error for
        # ERROR_OUT_OF_MEMORY and Knet's allocator (``ERROR: Out of GPU memory``, ``ERROR: Out of gpu memory``
        # alone on the line Julia's REPL or a script's LoadError shows)
        JULIA_GPU_OOM,
        re.compile(
            r"\bOut of GPU memory trying to allocate \d"
            r"|^\s{0,8}(?:ERROR: (?:LoadError: )?)?Out of [Gg][Pp][Uu] memory\s{0,4}$"
        ),
    ),
    (  # a CUDA call checked by a library that prints its file and line before the runtime's words: XGBoost's
        # and dmlc's safe_cuda (``CUDA error: …/device_helpers.cuh(386): out of memory``), thrust's and CUB's
        # checks the same way (``file.cu(120): out of memory``)
        CHECKED_CALL_OOM,
        re.compile(r"[\w/.-]{1,300}\.(?:cuh|cu|cc|cpp|h|hpp)\(\d{1,6}\): out of memory\b"),
    ),
    (  # ROCm's common runtime (ROCclr, under HIP and OpenCL) with AMD_LOG_LEVEL set: its device memory
        # allocation failing (``Video memory allocation failed!`` in memory.cpp, hip_memory.cpp's ``Allocation
        # failed : Device memory : required :N | free :M | total :T``)
        ROCCLR_OOM,
        re.compile(
            r"\] Video memory allocation failed!|\bAllocation failed : Device memory : required ?: ?\d"
        ),
    ),
    (  # MIOpen's handle unable to allocate a buffer on the device (handlehip.cpp's ``Memory not available to
        # allocate buffer: N``), under its ``MIOpen Error:`` prefix or on its own line
        MIOPEN_OOM,
        re.compile(r"\bMemory not available to allocate buffer: \d"),
    ),
    (  # PaddlePaddle's allocator throwing its BadAlloc out of C++ (``terminate called after throwing an
        # instance of 'paddle::memory::allocation::BadAlloc'``), or named with what it says
        PADDLE_BADALLOC_OOM,
        re.compile(
            r"instance of '?paddle::memory::allocation::BadAlloc\b"
            r"|paddle::memory::allocation::BadAlloc(?:: |[^\n]{0,20}Out of memory)"
        ),
    ),
    (  # PaddlePaddle Fluid's enforce that the chunk it reserves fits the GPU's free memory (gpu_info.cc's
        # PADDLE_ENFORCE_LE(allocating, available): ``enforce allocating <= available failed, 10513462067 >
        # 1369702144``; its 1.x wording ``Expected allocating <= available, but received allocating:N >
        # available:M. Insufficient GPU memory to allocation.``)
        PADDLE_RESERVE_OOM,
        re.compile(
            r"\benforce allocating <= available failed, \d{1,20} > \d{1,20}"
            r"|\bExpected allocating <= available, but received allocating:\d{1,20} > available:\d{1,20}"
        ),
    ),
    (  # Theano's GPU back ends (cuda_ndarray's ``Error allocating N bytes of device memory (out of
        # memory).``, libgpuarray's the same; CNMeM's pool status)
        THEANO_OOM,
        re.compile(r"\bdevice memory \(out of memory\)|\bCNMEM_STATUS_OUT_OF_MEMORY\b"),
    ),
    (  # a glog CHECK on a CUDA call's status, as Caffe's CUDA_CHECK writes it (``Check failed: error ==
        # cudaSuccess (2 vs. 0)  out of memory``, syncedmem.cpp, math_functions.cu, common.cpp; its forks' the
        # same): status 2 is cudaErrorMemoryAllocation, cudaGetErrorString's words after it
        CAFFE_OOM,
        re.compile(
            r"Check failed: \(?\w{1,40}\)? ?== ?\(?cudaSuccess\)? \(2 vs\. 0\)\s{0,4}:?\s{0,4}out of memory\b"
        ),
    ),
    (  # PyTorch's caching allocator over the fraction of the device the process was allowed
        # (torch.cuda.set_per_process_memory_fraction: ``Allocation on device 0 would exceed allowed memory.
        # (out of memory)`` then its ``Currently allocated`` / ``Device limit`` table)
        FRACTION_OOM,
        re.compile(r"\bAllocation on device \d{1,3} would exceed allowed memory\. \(out of memory\)"),
    ),
    (  # Vulkan's result for a device memory allocation it could not make, as ggml's Vulkan back end
        # (llama.cpp, whisper.cpp) and other Vulkan compute back ends raise it (``vk::Device::allocateMemory:
        # ErrorOutOfDeviceMemory``, the C name ``VK_ERROR_OUT_OF_DEVICE_MEMORY``)
        VULKAN_OOM,
        re.compile(r"\bErrorOutOfDeviceMemory\b|\bVK_ERROR_OUT_OF_DEVICE_MEMORY\b"),
    ),
    (  # MXNet's storage managers (pooled, naive) giving up on cudaMalloc, after a retry or not
        "GPU out of memory (MXNet: cudaMalloc failed)",
        re.compile(r"cudaMalloc(?: retry)? failed: out of memory"),
    ),
    ("GPU out of memory (TensorFlow: OOM when allocating tensor)", re.compile(r"OOM when allocating tensor")),
    (  # CuPy's memory pool (Chainer's arrays are CuPy's) giving up on a request in its OutOfMemoryError's
        # words, each release's: ``Out of memory allocating 1,024 bytes (allocated so far: 4,096 bytes[, limit
        # set to: N bytes]).``, CuPy 4 and older's ``out of memory to allocate N bytes (total M bytes)``
        CUPY_OOM,
        re.compile(
            r"[Oo]ut of memory allocating [\d,]{1,30} bytes \(allocated so far: [\d,]{1,30} bytes\b"
            r"|[Oo]ut of memory to allocate \d{1,20} bytes \(total \d{1,20} bytes\)"
        ),
    ),
    (  # PaddlePaddle's allocator, raised as its ResourceExhaustedError (``Out of memory error on GPU 0.
        # Cannot allocate 98.000244MB memory on GPU 0, … available memory is only 0.000000B.``)
        "GPU out of memory (PaddlePaddle: ResourceExhaustedError)",
        re.compile(r"Out of memory error on (?:GPU|XPU|NPU|[\w-]{1,20}) \d{1,3}\. Cannot allocate \d"),
    ),
    (  # the BFC allocator giving up on a request (``(rounded to N)``), not its retried attempt
        # (``with freed_by_count=0. The caller indicates that this is not a failure``)
        "GPU out of memory (XLA / TensorFlow's BFC allocator)",
        re.compile(
            r"Allocator \(GPU_\d{1,3}_bfc\) ran out of memory trying to allocate \S{1,20} \(rounded to \d"
        ),
    ),
    (  # XLA's status, absl-style (``RESOURCE_EXHAUSTED:``) or TensorFlow's older ``Resource exhausted:``,
        # or the Python class TensorFlow raises it as (``tf.errors.ResourceExhaustedError``, its repr
        # ``<ResourceExhaustedError: Failed to allocate request for 64.00MiB (67108864B) on device ordinal
        # 0>``),
        # followed by what its allocator (BFC, PjRt's stream executor) says ran out
        "GPU out of memory (JAX/XLA: RESOURCE_EXHAUSTED)",
        re.compile(
            r"(?:RESOURCE_EXHAUSTED|Resource exhausted|ResourceExhaustedError): "
            r"(?:Out of memory|Failed to allocate request for"
            r"|Ran out of memory|OOM when allocating|Attempting to (?:reserve|allocate) )"
            # a replica's execution on its device (XLA's local client, PjRt) ran out: the message
            # may wrap after ``Out``
            r"|Execution of replica \d{1,6} failed: (?:RESOURCE_EXHAUSTED|Resource exhausted): "
            r"(?:Out\b|Failed to|Attempting)"
        ),
    ),
    (  # XLA's TPU compiler: the program does not fit the chip's memory (HBM, or its vector memory)
        "TPU out of memory (XLA ran out of its HBM / VMEM)",
        re.compile(
            r"Ran out of memory in memory space (?:hbm|vmem)\b"
            r"|Aborting compilation early because it's unlikely to have enough memory"
        ),
    ),
    (  # the TPU runtime at run time: a device buffer that does not fit the HBM left (``Error allocating
        # device buffer: Attempting to allocate 15.65G. That was not possible. There are 11.08G free.``), or
        # one allocation larger than the whole memory space (``Allocation (size=107374182400) would exceed
        # memory (size=17179869184) :: #allocation7 [shape = …, space=hbm, …]``)
        "TPU out of memory (its runtime could not allocate a device buffer in HBM)",
        re.compile(
            r"(?:RESOURCE_EXHAUSTED|Resource exhausted): (?:Error allocating device buffer: Attempting to "
            r"|Allocation \(size=\d{1,20}\) would exceed memory \(size=\d)"
        ),
    ),
    (
        "GPU out of memory (cuBLAS could not allocate its workspace)",
        re.compile(r"CUBLAS_STATUS_ALLOC_FAILED"),
    ),
    ("GPU out of memory (cuDNN could not allocate its workspace)", re.compile(r"CUDNN_STATUS_ALLOC_FAILED")),
    # the other CUDA math libraries' status for the same (cufft.h's CUFFT_ALLOC_FAILED, cusolver_common.h's
    # and cusparse.h's *_STATUS_ALLOC_FAILED), and ROCm's MIOpen (miopen.h's miopenStatusAllocFailed)
    (
        "GPU out of memory (a CUDA math library, cuFFT / cuSOLVER / cuSPARSE, could not allocate its "
        "workspace)",
        re.compile(
            r"\bCUFFT_ALLOC_FAILED\b|\bCUSOLVER_STATUS_ALLOC_FAILED\b|\bCUSPARSE_STATUS_ALLOC_FAILED\b"
        ),
    ),
    (
        "GPU out of memory (MIOpen could not allocate its workspace)",
        re.compile(r"\bmiopenStatusAllocFailed\b"),
    ),
    # NCCL's CUDACHECK in its WARN line, or in the ``Last error:`` PyTorch relays under ncclUnhandledCudaError
    # (``Last error:`` then ``Cuda failure 'out of memory'``, NCCL src/include/checks.h)
    (
        "GPU out of memory (NCCL could not allocate its buffers)",
        re.compile(r"NCCL WARN Cuda failure 'out of memory'|^Cuda failure 'out of memory'"),
    ),
    (  # MindSpore's dynamic memory pool on its device (Ascend NPU or GPU): the request over the pool's
        # total (``… and plus alloc size : N is more than total mem size : M.``), its ``Out of Memory!!!``
        # report, or a kernel's output it could not place
        "NPU / GPU out of memory (MindSpore's dynamic memory pool)",
        re.compile(
            r"mem_dynamic_allocator\.cc:\d{1,6}\] [^\n]{0,300}?is more than total mem size"
            r"|Out of Memory!!! Request memory size: \d"
            r"|Device\(id:\d{1,3}\) memory isn't enough and alloc failed"
        ),
    ),
    (  # CANN's graph engine and runtime on Ascend: the device allocator's rtMalloc refused, or GE's error
        # code for it (``Memory_Allocation_Failure(EL0004): Failed to allocate memory requested by GE``)
        "NPU out of memory (Ascend CANN: rtMalloc failed)",
        re.compile(
            r"Memory_Allocation_Failure\(EL0004\)|Call rtMalloc fail(?:ed)?\b|rtMalloc execute failed"
        ),
    ),
    (  # Sophgo's bmlib on its TPU's global memory (``bm_alloc_gmem failed, dev_id = 0, size = 0x…``)
        "TPU out of memory (Sophgo bmlib could not allocate its global memory)",
        re.compile(r"\bbm_(?:alloc_gmem|malloc_device_(?:byte|dword)\w{0,20}) failed\b"),
    ),
    (  # Habana's Gaudi bridge: its device memory allocator, or SynapseAI's workspace for a graph
        # (``FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::…``, ``MODULE:SYNHELPER workspace
        # Allocation of size ::N failed!``)
        "HPU out of memory (Habana Gaudi's device memory)",
        re.compile(
            r"MODULE:(?:PT_DEVMEM|SYNHELPER)\b[^\n]{0,80}?Allocation "
            r"(?:failed for size|of size ::?\d{1,20} failed)"
        ),
    ),
    (  # AWS Neuron's driver layer (TDRV) under its runtime refusing a device allocation (``ERROR
        # TDRV:dmem_alloc_internal   Failed to alloc DEVICE memory: 67108864``)
        "NeuronCore out of memory (AWS Neuron's driver layer, TDRV, could not allocate device memory)",
        re.compile(r"\bTDRV:\w{1,60}\s{1,60}Failed to alloc DEVICE memory\b"),
    ),
    (  # AWS Neuron's runtime (NRT) on a NeuronCore's memory: any nrt_ call with NRT_RESOURCE, status 4
        # (``nrt_tensor_allocate status=4 message="Allocation Failure"``)
        "NeuronCore out of memory (AWS Neuron runtime: NRT_RESOURCE)",
        re.compile(r"\bnrt_\w{1,60} status=4 message=\"Allocation Failure\""),
    ),
)


_ALLOCATION_NOTED = re.compile(r": I [\w/\\.:-]{1,300}_driver\.cc:\d{1,6}\] failed to allocate ")
"""TensorFlow's (and XLA's) stream executor noting at level I that a device allocation failed (its
cuda_driver.cc's or rocm_driver.cc's ``failed to allocate 7.81G (… bytes) from device:
CUDA_ERROR_OUT_OF_MEMORY``): its allocator tries a smaller size next; the same line at level E is the
failure."""
_INFO_LINE = re.compile(r": I [\w/\\.:-]{1,300}\.(?:cc|h|py):\d{1,6}\] ")
"""A line TensorFlow logs at level I (``… I tensorflow/…/dso_loader.cc:44] Successfully opened dynamic
library …``)."""


def _allocator_went_on(lines: Sequence[str], index: int) -> bool:
    """Whether the stream executor's allocation failure noted at level I on ``lines[index]``
    (:data:`_ALLOCATION_NOTED`) was followed by TensorFlow going on: the next line that is not another such
    note is one it logs at level I (loading a library, creating a device) — it got memory and went on."""
    if _ALLOCATION_NOTED.search(lines[index]) is None:
        return False
    for line in lines[index + 1 : index + 1 + _CONTEXT_LINES]:
        if not line.strip() or _ALLOCATION_NOTED.search(line):
            continue
        return _INFO_LINE.search(line) is not None
    return False


@dataclass(frozen=True)
class GpuOom:
    """One out-of-GPU-memory line, the rank that printed it if tagged, and what said it."""

    line: str
    rank: int | None
    what: str = "CUDA out of memory"


@lru_cache(maxsize=512)
def gpu_oom_lines(tail: tuple[str, ...]) -> tuple[GpuOom, ...]:
    """Every line of ``tail`` reporting that GPU memory ran out (not a hint, not an error the
    program caught and handled)."""
    found: list[GpuOom] = []
    lines = bounded(tail)
    for i, line in enumerate(lines):
        match = next(((what, m) for what, pattern in GPU_OOM_SIGNS if (m := pattern.search(line))), None)
        if (
            match is not None
            and not is_mention(line, match[1].start(), match[1].end())
            and not handled(lines, i)
            and not _allocator_went_on(lines, i)
        ):
            what = match[0]
            found.append(GpuOom(line, output_rank(line), what))
        elif match is None and (thrown := _cuda_thrown_oom(lines, i)) is not None and not handled(lines, i):
            found.append(GpuOom(line, output_rank(line), thrown))
    return tuple(found)


CUDA_THROWN_HEAD = re.compile(
    r"terminate called after throwing an instance of '[\w:]{0,80}?(?:CUDA|[Cc]uda)[\w:]{0,80}'"
)
"""The first line of a CUDA wrapper's uncaught exception (:data:`_CUDA_THROWN`): the live reader keeps it with
the lines after it, where its message says what ran out."""
_CUDA_THROWN = re.compile(
    r"terminate called after throwing an instance of "
    r"'(?P<type>[\w:]{0,80}?(?:CUDA|[Cc]uda)[\w:]{0,80})'\s{0,4}\n"
    r"\s{0,8}what\(\):\s{1,4}(?P<what>[^\n]{0,300}?)\s{0,4}(?:\n\s{0,8})?(?:error: )?out of memory\s{0,4}$"
)
"""A C++ exception a CUDA wrapper threw and nothing caught, its message CUDA's string for
``cudaErrorMemoryAllocation`` (``terminate called after throwing an instance of 'CUDA::error'`` / ``what():
…/mallocMC/…/SimpleCudaMalloc_impl.hpp(42):`` / ``error: out of memory``): an allocator library's
``cudaMalloc`` got no memory."""


def _cuda_thrown_oom(lines: Sequence[str], index: int) -> str | None:
    """What ran out, where ``lines[index]`` ends the message of a CUDA wrapper's uncaught exception with
    ``out of memory`` (:data:`_CUDA_THROWN`)."""
    if not lines[index].rstrip().endswith("out of memory"):
        return None
    match = _CUDA_THROWN.search("\n".join(lines[max(0, index - 2) : index + 1]))
    if match is None:
        return None
    by = "mallocMC's pool" if "mallocMC" in match["what"] else f"a library's {match['type']}"
    return f"GPU out of memory ({by} could not get device memory: CUDA's out of memory, thrown uncaught)"


# ------------------------------------------------------------ communication

CommKind = Literal[
    "refused", "timed-out", "no-route", "unresolved", "ssh-closed", "publickey", "host-key", "hydra",
    "hydra-proxy", "hydra-write", "hydra-launch", "daemon-lost", "daemon-start", "daemon-failed", "mpi-error",
    "bad-termination",
]  # fmt: skip

_SOCKET_FRAME = re.compile(
    r"^\s{0,8}\w{1,80}\(\d{1,6}\)\.{0,80}: ?"
    r"(?P<detail>(?:read from|write to) socket failed\b[^\n]{0,200}|socket closed\b)"
)
"""A frame of an MPICH error stack whose socket failed under it, read alone where the tail cut the
stack's headline (under one, the headline's failure reads the stack)."""
_HEADLINE = re.compile(r"Fatal error in \w{1,60}:")

# The first pattern that matches a line names its kind: specific wordings come first.
COMM_SIGNS: tuple[tuple[CommKind, re.Pattern[str]], ...] = (
    ("refused", re.compile(r"ssh: connect to host (?P<host>\S{1,253}) port \d{1,5}: Connection refused")),
    (
        "timed-out",
        re.compile(
            r"ssh: connect to host (?P<host>\S{1,253}) port \d{1,5}: (?:Connection|Operation) timed out"
        ),
    ),
    ("no-route", re.compile(r"ssh: connect to host (?P<host>\S{1,253}) port \d{1,5}: No route to host")),
    ("unresolved", re.compile(r"ssh: Could not resolve hostname (?P<host>[^\s:]{1,253})")),
    (
        "ssh-closed",
        re.compile(
            r"(?:ssh|kex)_exchange_identification: "
            r"(?:Connection closed by remote host|read: Connection reset)"
        ),
    ),
    ("publickey", re.compile(r"Permission denied \(publickey")),  # the host is read before it
    ("host-key", re.compile(r"Host key verification failed")),  # OpenSSH: known_hosts refused the host
    (
        "hydra",
        re.compile(
            r"HYDU_sock_connect \(.{0,200}?unable to "
            r"(?:connect from \"[^\"]{0,253}\" to \"(?P<host>[^\"]{1,253})\""
            r"|get host address for (?P<host_addr>[^\s(]{1,253}))"
        ),
    ),
    ("hydra-proxy", re.compile(r"connection to proxy \d{1,7} at host (?P<host>\S{1,253}) failed")),
    ("hydra-write", re.compile(r"HYDU_sock_write \([^)]{0,200}\): write error \((?P<detail>[^)]{1,80})\)")),
    # Hydra's proxy (pmip_cb.c's launch_procs) or mpiexec launching its proxies (the bootstrap's
    # launch_procs) failing to create a process: ``[proxy:0:0@host] launch_procs (…pmip_cb.c:751): create
    # process returned error``, the function and its file on lines of their own where a console wrapped it
    ("hydra-launch", re.compile(r"(?:^|\): ?)create process returned error\b")),
    ("daemon-lost", re.compile(r"(?:ORTE|PR{1,2}TE) has lost communication with (?:a )?remote daemon")),
    # the runtime's out-of-band TCP channel giving up on reaching a daemon (Open MPI's oob/tcp, PRRTE's,
    # oob_tcp_connection.c: ``prte_tcp_peer_try_connect: 10.0.0.2:49717 retries exceeded``)
    (
        "daemon-lost",
        re.compile(r"\b(?:mca_oob|orte|prte|prrte|pmix)_tcp_peer_try_connect: \S{1,300} retries exceeded\b"),
    ),
    # ORTE's (and PRRTE's) state machine, logged at its verbosity, moving a daemon to a state of lost
    # communication (orte/mca/state/base/state_base_fns.c: ``ACTIVATE PROC [[j,0],0] STATE NO PATH TO TARGET
    # AT base/rml_base_frame.c:234``; the names from orte_proc_state_to_str): the OOB found no route to it
    (
        "daemon-lost",
        re.compile(
            r"\bACTIVATE PROC \[\[\d{1,10},\d{1,10}\],\d{1,10}\] STATE "
            r"(?:NO PATH TO TARGET|UNABLE TO SEND MSG|COMMUNICATION FAILURE|LIFELINE LOST|HEARTBEAT FAILED)\b"
        ),
    ),
    ("daemon-start", re.compile(r"(?:ORTE|PR{1,2}TE) was unable to reliably start one or more daemons")),
    ("daemon-failed", re.compile(r"An? (?:ORTE|PR{1,2}TE) daemon has unexpectedly failed after launch")),
    (
        "mpi-error",
        re.compile(
            r"Fatal error in (?P<call>\w{1,60}):(?: (?P<class>Other MPI error|Unknown error class"
            r"|[^,\n]{1,100}, error stack:)|\s{0,4}$)"
        ),
    ),
    # the same error stack raised to Python by mpi4py (its MPI_Error_string under ``mpi4py.MPI.Exception:
    # Other MPI error, error stack:``, then the stack's frames: ``PMPI_Send(157)...: MPI_Send(…) failed``), no
    # ``Fatal error in`` headline: the error handler returned it to the caller
    (
        "mpi-error",
        re.compile(
            r"\bmpi4py\.MPI\.Exception: (?:(?P<class>Other MPI error|Unknown error class)|[^,\n]{1,100}), "
            r"error stack:"
        ),
    ),
    # a frame of MPICH's TCP netmod (nemesis) naming the failure, with or without the headline
    (
        "mpi-error",
        re.compile(r"MPID_nem_\w{1,40}\(\d{1,6}\)\.{0,80}: ?(?P<detail>Communication error[^\n]{0,200})"),
    ),
    # a frame of an MPICH error stack whose socket failed under it (the TCP netmod's or the sock channel's
    # errors: ``recv_cmd_pkt(701)....: read from socket failed - nread=0``, ``write to socket failed``,
    # ``socket closed``), the headline cut from the tail
    ("mpi-error", _SOCKET_FRAME),
    ("bad-termination", re.compile(r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")),
)
_HYDRA_HOST = re.compile(r"\[(?:proxy:\d{1,7}:\d{1,7}|mpiexec)@(?P<host>[^\]\s]{1,253})\]")
"""The host a Hydra process names itself by (``[proxy:0:0@node3]``, ``[mpiexec@launcher]``)."""
_REMOTE_DAEMON = re.compile(r"Remote daemon\s{0,10}:\s{0,10}\S{1,100} on node (?P<host>\S{1,253})")
_RUNNING_AT = re.compile(r"RUNNING AT (?P<host>\S{1,253})")
_BAD_TERMINATION_RANK = re.compile(r"RANK \d{1,7} PID \d{1,10} RUNNING AT")
# one line of an MPICH / Intel MPI error stack: ``MPID_nem_tcp_connpoll(1845): Communication error …``, or
# MPICH's frame for an error created without its function's name (``(unknown)(): connection failure``)
_STACK_LINE = re.compile(r"^\s{0,8}(?:\w{1,80}\(\d{1,6}\)|\(unknown\)\(\))\.{0,80}:\s?(?P<detail>.{0,300})$")
_STACK_UNINFORMATIVE = re.compile(r"^(?:fail failed|\S{1,80}\(.{0,300}\) failed)?$")
# an error stack that says the failure was in talking to other ranks (sockets, nemesis, OFI)
_STACK_COMM = re.compile(
    r"MPID_nem_|MPIDI_CH3I_|MPIDI_OFI_|\bOFI\b|[Cc]ommunication error|socket"
    r"|[Cc]onnection (?:refused|reset|closed|failure)"
)
_KNOWN_CLASSES = ("Other MPI error", "Unknown error class")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True)
class CommFailure:
    """The launcher could not reach, or lost, a peer."""

    kind: CommKind
    host: str | None
    lines: tuple[str, ...]
    detail: str | None = None


@lru_cache(maxsize=512)
def comm_failures(tail: tuple[str, ...]) -> tuple[CommFailure, ...]:
    """Every communication failure in ``tail``, in log order."""
    lines = bounded(tail)
    found: list[CommFailure] = []
    for i, line in enumerate(lines):
        for kind, pattern in COMM_SIGNS:
            match = pattern.search(line)
            if match is None:
                continue
            failure = _comm_failure(kind, match, lines, i)
            if failure is not None:
                found.append(failure)
            break
    return tuple(found)


def _comm_failure(kind: CommKind, match: re.Match[str], tail: Sequence[str], i: int) -> CommFailure | None:
    after = tail[i + 1 : i + 1 + _CONTEXT_LINES]
    if kind == "publickey":
        return CommFailure(kind, _host_before(tail[i], match.start()), (tail[i],))
    if kind == "hydra-write":
        return CommFailure(kind, None, (tail[i],), match.group("detail"))
    if kind == "hydra-launch":
        near = tail[max(0, i - 2) : i + 1]
        host = next((m["host"] for line in reversed(near) if (m := _HYDRA_HOST.search(line))), None)
        return CommFailure(kind, host, tuple(near))
    if kind == "mpi-error":
        if match.re is _SOCKET_FRAME and any(map(_HEADLINE.search, tail[max(0, i - _CONTEXT_LINES) : i])):
            return None  # a frame of the stack a headline above it already reads
        if match.groupdict().get("detail") is not None:
            return CommFailure(kind, None, (tail[i],), match.group("detail").strip())
        known = match.group("class") or (after[0].strip() if after else "")  # the class may wrap
        return _error_stack(tail[i], after, known=known in _KNOWN_CLASSES)
    host = match.groupdict().get("host") or match.groupdict().get("host_addr")
    if host is not None:
        return CommFailure(kind, host, (tail[i],))
    if kind == "bad-termination":
        if any(_BAD_TERMINATION_RANK.search(line) for line in after) or _died_of_signal(after):
            return None  # a named rank died, or one died of a signal: a rank failure, see rank_failures
        return _with_context(kind, tail[i], after, _RUNNING_AT)
    if kind == "daemon-lost":
        return _with_context(kind, tail[i], after, _REMOTE_DAEMON)
    return CommFailure(kind, None, (tail[i],))


def _died_of_signal(block: Sequence[str]) -> int | None:
    """The signal Hydra's ``BAD TERMINATION`` block says its process died of: ``KILLED BY SIGNAL: N``,
    an ``EXIT CODE`` of 128 + N (the shell's encoding: 139 is SIGSEGV, 134 SIGABRT, 137 SIGKILL) or of 9
    or 15 (Hydra's own, SIGKILL's and SIGTERM's numbers), or an
    ``EXIT STRING`` naming the signal (``Segmentation fault: 11 (signal 11)``)."""
    text = " ".join(block[:_CONTEXT_LINES])
    if (killed := _KILLED_BY.search(text)) is not None:
        return int(killed.group("signal"))
    if (named := _EXIT_STRING_SIGNAL.search(text)) is not None:
        return int(named.group("signal"))
    code = _search_int(_EXIT_STATUS, text, "code")
    if code in _KILLING:  # Hydra's own encoding of a process a signal ended: the signal's number
        return code
    return code - _SIGNALED if code is not None and _SIGNALED < code < _SIGNALED + 32 else None


_SIGNALED = 128
"""A shell's exit status for a process killed by signal N is 128 + N."""
_SIGKILL = 9
"""Hydra writes the number of the signal that ended a process as its ``EXIT CODE`` (``EXIT CODE: 11`` beside
``EXIT STRING: Segmentation fault: 11 (signal 11)``): 9, SIGKILL, is the one no program exits with."""
_SIGTERM = 15
"""Hydra's ``EXIT CODE: 15``: SIGTERM's number, the signal a process manager, the kubelet or a CI runner ends
a process with (``KILLED BY SIGNAL: 15`` in other versions); a program's own exit status is rarely 15."""
_KILLING = frozenset({_SIGKILL, _SIGTERM})
_EXIT_STRING_SIGNAL = re.compile(r"EXIT STRING: [^\n(]{1,80}\(signal (?P<signal>\d{1,2})\)")


_PROCESS_DIED = re.compile(r": rank \d{1,7} died from signal \d{1,3}\b")
"""HPE PALS reporting a rank a signal ended (``host: rank 7 died from signal 15``)."""


def _host_before(line: str, start: int) -> str | None:
    """The host of ``user@host: Permission denied (publickey…``, read back from the message."""
    before = line[max(0, start - 320) : start]
    if not before.endswith(": ") or not before[:-2].strip():
        return None
    host = before[:-2].split()[-1].rsplit("@", 1)[-1]
    return host if host and set(host) <= _HOST_CHARS else None


def _error_stack(headline: str, after: Sequence[str], *, known: bool = True) -> CommFailure | None:
    """An MPICH / Intel MPI error stack: its deepest informative frame says what failed. A
    headline of another error class (``Invalid root``…) counts only when a frame shows the
    failure was in reaching other ranks."""
    frames: list[str] = []
    for line in after:
        if _STACK_LINE.match(line) is None and not line.strip().startswith("failed"):
            break
        frames.append(line)
    if not known and not any(_STACK_COMM.search(line) for line in (headline, *frames)):
        return None
    if not frames and _PROCESS_DIED.search(" ".join(after)):
        return None  # the class alone, then the process manager reports the rank killed: an abort
    details = [
        m.group("detail").strip()
        for line in frames
        if (m := _STACK_LINE.match(line)) is not None
        and not _STACK_UNINFORMATIVE.match(m.group("detail").strip())
    ]
    detail = details[-1] if details else None
    if detail is None and any("OFI" in line for line in frames):
        detail = "the OFI (libfabric) network layer failed to initialise"
    evidence = (headline, *(line for line in frames if detail and detail in line))
    return CommFailure("mpi-error", None, evidence, detail)


def _with_context(
    kind: CommKind, headline: str, after: Sequence[str], host_at: re.Pattern[str]
) -> CommFailure:
    for line in after:
        match = host_at.search(line)
        if match is not None:
            return CommFailure(kind, match.group("host"), (headline, line))
    return CommFailure(kind, None, (headline,))


# -------------------------------------------------------------------- ranks

RankHow = Literal["aborted", "killed", "exited"]

_ABORT_OMPI = re.compile(r"MPI_ABORT was invoked on rank (?P<rank>\d{1,7})")
_ABORT_NOTE = re.compile(r"invoking MPI_ABORT causes Open MPI to kill all MPI processes")
"""Open MPI's note under the abort headline: an abort even where the headline was cut off."""
_LOCAL_ABORT_OMPI = re.compile(
    r"\*\*\* The (?P<call>MPI_\w{1,40})\(\) function was called (?P<when>before MPI_INIT|after MPI_FINALIZE)"
    r"|\*\*\* (?:on a NULL communicator|(?P<call2>MPI_\w{1,40}) (?:was )?called (?:before MPI_INIT|after "
    r"MPI_FINALIZE))"
    r"|Local abort (?:before MPI_INIT|after MPI_FINALIZE started) completed"
)
"""Open MPI's local abort of an MPI call made outside MPI_Init..MPI_Finalize (``*** The MPI_Comm_rank()
function was called before MPI_INIT was invoked``, ``*** on a NULL communicator`` under ``*** An
error occurred in MPI_Comm_rank``, ``Local abort before MPI_INIT completed …``): the process aborts
itself, with no communicator to abort through mpirun."""
_ABORT_MPICH = re.compile(
    r"application called MPI_Abort\([^,]{1,100}, (?P<code>-?\d{1,10})\) - process (?P<rank>\d{1,7})"
)
_INTERNAL_ABORT_MPICH = re.compile(r"^\s{0,8}(?:\[\d{1,7}\] ?)?internal ABORT - process (?P<rank>\d{1,7})\b")
"""MPICH's device ending the job for an error of its own, not the program's ``MPI_Abort`` (``MPID_Abort``
called by a failed assertion, ``Assertion failed in file … at line N: …``, or a fatal error in a call's
error handler): ``internal ABORT - process 3``."""
_ASSERTION_MPICH = re.compile(
    r"Assertion failed in file (?P<file>[\w/.-]{1,200}) at line (?P<line>\d{1,7}): "
)
_ABORT_INTEL = re.compile(
    r"Abort\((?P<code>-?\d{1,10})\) on node \d{1,7} \(rank (?P<rank>\d{1,7}) in comm \d{1,10}\)"
    # MPICH's MPID_Abort before the world communicator is set up, with no ``on node N``, on a check of its
    # device's own, named by its function (Cray MPICH's ``Abort(-1) (rank 0 in comm 0): MPIDI_CRAY_init:
    # GPU_SUPPORT_ENABLED is requested, but GTL library is not linked``), not a call's error stack (``Fatal
    # error in PMPI_Init: …``, a communication failure's to read)
    r"|Abort\((?P<code2>-?\d{1,10})\) \(rank (?P<rank2>\d{1,7}) in comm \d{1,10}\): MPI[DR]\w{0,60}: "
)
_ABORT_PEERS_OMPI = re.compile(
    r"^\s{0,8}\[[^\]\n]{1,120}\] \[\[\d{1,10},\d{1,10}\],(?P<rank>\d{1,7})\] called abort_peers\s{0,4}$"
)
"""Open MPI's runtime on a process that aborts the others of its job (ompi_rte_abort_peers, from
MPI_Abort or the fatal error handler): ``[host:pid] [[jobid,1],rank] called abort_peers``."""
_ERROR_IN = re.compile(r"\*\*\* An error occurred in (?P<call>MPI_\w{1,40})")
_STARS_ABORT = re.compile(
    r"\*\*\* (?:Your MPI job will now abort|An error occurred in MPI_|MPI_ERRORS_ARE_FATAL)"
)
_ERRORS_ARE_FATAL = re.compile(r"\*\*\* MPI_ERRORS_ARE_FATAL \(processes in this communicator will now abort")
_REPORTED_BY = re.compile(r"\*\*\* reported by process \[\d{1,12},(?P<rank>\d{1,7})\]")
_ERROR_CLASS = re.compile(r"\*\*\* (?P<error>MPI_ERR_[A-Z_]{1,30}: [^\n]{1,120}?)\s{0,4}$")
"""Open MPI's default error handler at work: an MPI call returned an error class (``*** An error occurred in
MPI_Comm_rank`` / ``*** reported by process [jobid,rank]`` / ``*** MPI_ERR_COMM: invalid communicator``)
and ``MPI_ERRORS_ARE_FATAL`` aborts the communicator's processes: the rank's own call failed, no peer or
transport said why first."""
_COMMUNICATION_CLASS = re.compile(r"\*\*\* MPI_ERR_(?:TRUNCATE|PROC_FAILED(?:_PENDING)?|REVOKED): ")
"""An error class that reports a message between ranks failing (longer than the buffer posted for it) or a
peer lost (MPI 4's MPI_ERR_PROC_FAILED, and MPI_ERR_REVOKED on the communicator revoked after it), not the
rank's own misuse of a call: the fatal handler's abort after it is the communication's consequence."""
_SIGNALED_OMPI = re.compile(
    r"process rank (?P<rank>\d{1,7}) with (?:PID|OID) \d{1,10} on\s{1,10}node (?:(?P<host>\S{1,253}) )?"
    r"exited on signal "
    r"(?P<signal>\d{1,3})(?: \((?P<name>[^)]{1,40})\))?"
)
"""Open MPI's mpirun on a rank a signal ended (``mpirun noticed that process rank 5 with PID 6637 on node n7
exited on signal 6 (Aborted).``, orte/mca/errmgr's help text; its node's name empty where the daemon never
learnt it, ``… on node exited on signal 4 …``): a signal of the rank's own code (SIGABRT, SIGILL, SIGFPE) is
an abort's, a crash's (SIGSEGV, SIGBUS) a segfault's."""
_NONZERO_OMPI = re.compile(r"exited with non-zero status")
_PRIMARY_JOB = re.compile(r"Primary job {1,4}terminated normally, but \d{1,7} process(?:es)? returned")
_BAD_TERMINATION = re.compile(r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")
_COLLECTIVE_ABORT = re.compile(
    r"[Rr]ank (?P<rank>\d{1,7}) in job \d{1,10} {1,4}(?P<host>[^\n]{1,253}?)_\d{1,10} {1,10}"
    r"caused collective abort"
)
"""MPD's ``rank N in job J  <host>_<port>   caused collective abort of all ranks`` (``Rank`` where a
line starts with it; the host as printed, however it reads)."""
_RANK_EXIT_STATUS = re.compile(
    r"[Ee]xit status of rank (?P<rank>\d{1,7}): "
    r"(?:killed by signal (?P<signal>\d{1,3})|return code (?P<code>-?\d{1,10}))"
)
_ELASTIC_ROOT = re.compile(r"Root Cause \(first observed failure\):")
_ELASTIC_CHILD = re.compile(r"ChildFailedError:")
_ELASTIC_API = re.compile(
    r"elastic[./]multiprocessing[./]api(?:\.py:\d{1,6}\]|:(?: \[[A-Z]{1,10}\])?) {0,2}"
    r"failed \(exitcode: (?P<code>-?\d{1,10})\) local_rank: (?P<local>\d{1,7})"
)
"""The agent's line in each of torch's log formats: ``…api:failed``, ``…api: [ERROR] failed``, and
glog's ``E0213 … torch/distributed/elastic/multiprocessing/api.py:869] failed``."""
_RECORD_ERROR_FILE = re.compile(r"^\s{0,8}error_file\s{0,4}: ")
_RECORD_RANK = re.compile(r"^\s{0,8}rank\s{0,10}: \d{1,7} \(local_rank: \d{1,7}\)")
"""torch elastic's failure record's rank field, where a log cut its ``Root Cause`` header off."""
_ELASTIC_RANK = re.compile(r"rank\s{0,10}: (?P<rank>\d{1,7}) \(local_rank: (?P<local>\d{1,7})\)")
_ELASTIC_EXITCODE = re.compile(r"exitcode\s{0,10}: (?P<code>-?\d{1,10})")
_ELASTIC_HOST = re.compile(r"host\s{0,10}: (?P<host>\S{1,253})")
_LAMMPS_ABORT = re.compile(
    r"lammps(?:\.core)?\.MPIAbortException: ['\"]?(?:ERROR(?: on proc (?P<rank>\d{1,7}))?: )?"
    r"(?P<detail>[^\n]{0,300}?)(?: \((?P<where>[\w/.-]{1,120}:\d{1,6})\))?(?:\\n|['\"]|$)"
)
"""LAMMPS's Python module raising the error of one process that can only end with ``MPI_Abort``
(``lammps.core.MPIAbortException: 'ERROR on proc 7: … (src/…/x.cpp:N)\\nLast command:'``): that
process leaves, the other ranks wait for it in their next collective."""
_DEEPSPEED_EXIT = re.compile(r"(?:\] |\b)exits with return code = (?P<code>-?\d{1,10})\b")
"""DeepSpeed's launcher on the rank that ended its group: ``[launch.py:N:sigkill_handler] [cmd…] exits with
return code = -9``, or the same words quoted alone, its only wording of that sentence."""
_LOCAL_RANK_ARG = re.compile(r"--local_rank=(?P<local>\d{1,7})")
_DEEPSPEED_KILLING = re.compile(
    r"\[launch\.py:\d{1,6}:sigkill_handler\] Killing subprocess (?P<pid>\d{1,10})\b"
)
"""DeepSpeed's per-node launcher (``deepspeed/launcher/launch.py``) in its ``sigkill_handler``, killing every
subprocess it started (``[launch.py:131:sigkill_handler] Killing subprocess 250621``): one of its ranks ended
with an error, or the launcher itself was signalled, and it takes the node's others down before it exits."""
_INTERRUPTED = re.compile(r"(?:^|\s)KeyboardInterrupt\b|\bMain process received SIGINT\b")
"""A person's interrupt (Ctrl-C: Python's ``KeyboardInterrupt``, DeepSpeed's ``Main process received
SIGINT``): the launcher killing its subprocesses after it is the run stopped on purpose, no rank's failure."""
_INTERRUPT_WITHIN = 600
"""How many characters before the launcher's first kill an interrupt is looked for."""


def _interrupted_before(line: str, whole: str) -> bool:
    """Whether a person's interrupt (:data:`_INTERRUPTED`) comes just before ``line`` in the tail
    ``whole``."""
    at = whole.find(line)
    return at > 0 and _INTERRUPTED.search(whole[max(0, at - _INTERRUPT_WITHIN) : at]) is not None


_GLIBC_HEAP = re.compile(
    r"^\s{0,8}(?:\*\*\* (?:glibc detected|Error in) \*\*\* [^:\n]{1,200}: "
    # glibc 2.18-2.25's malloc_printerr through __libc_message (``*** Error in `python3': munmap_chunk():
    # invalid pointer: 0x… ***``)
    r"|\*\*\* Error in `[^'\n]{1,200}': )?"
    r"(?P<check>(?:free|malloc|realloc)\(\): [a-z][\w .()-]{2,60}?"
    r"|double free or corruption(?: \(!?\w{1,12}\))?"
    r"|munmap_chunk\(\): invalid pointer|corrupted size vs\. prev_size|corrupted double-linked list)"
    r"(?::| \*\*\*|\s{0,4}$)"
)
"""glibc's malloc finding its heap corrupted (``free(): invalid next size (normal)``, ``double free or
corruption (out)``, ``malloc(): corrupted top size``, older glibc's ``*** glibc detected *** a.out: …``):
it calls abort(), so the rank ends on SIGABRT (:data:`_ABORTED_AFTER`); a crash after it is a segfault's."""
_ABORTED_AFTER = re.compile(
    r"Signal: Aborted \(6\)|^\s{0,8}Aborted(?: \(core dumped\))?\s{0,4}$"
    r"|^\s{0,8}={7} (?:Backtrace|Memory map): ={8,9}\s{0,4}$"
)
"""The SIGABRT glibc's heap check ends the rank with: Open MPI's signal handler (``Signal: Aborted (6)``),
the shell's ``Aborted (core dumped)``, or glibc's own dump before it aborts (sysdeps/posix/libc_fatal.c,
__libc_message: ``======= Backtrace: =========``, ``======= Memory map: ========``)."""
_HEAP_ABORT_WITHIN = 6
_HOROVOD_GLOO_EXIT = re.compile(
    r"^\s{0,8}Process (?P<rank>\d{1,7}) exit with status code (?P<code>-?\d{1,10})\."
)
"""``horovodrun``'s Gloo launcher (``horovod/runner/gloo_run.py``) on a rank whose command ended non-zero,
before it stops the others and raises its ``Horovod detected that one or more processes exited``:
``Process 3 exit with status code 1.``, a signal's death as 128 + its number (``… code 137.``)."""
_MVAPICH_CHILD = re.compile(
    r"\[(?P<host>[\w.-]{1,253}):mpispawn_\d{1,7}\]\[child_handler\] MPI process \(rank: (?P<rank>\d{1,7}), "
    r"pid: \d{1,10}\) (?:exited with status (?P<code>-?\d{1,10})|terminated with signal (?P<signal>\d{1,3}))"
)
"""MVAPICH's mpispawn (one per host, under mpirun_rsh) on a rank it started that ended (its child handler,
src/pm/mpirun/mpispawn.c): ``[n1:mpispawn_0][child_handler] MPI process (rank: 3, pid: 4711) exited with
status 1``, ``… terminated with signal 9 -> abort job``."""
_PALS_RANK = re.compile(
    r"^\s{0,8}(?:\[[^\]\n]{1,60}\] ?)?(?P<host>[\w.-]{1,253}): rank (?P<rank>\d{1,7}) "
    r"(?:died from signal (?P<signal>\d{1,3})\b|exited with code (?P<code>-?\d{1,10})\b)"
)
"""HPE's PALS (Cray's ``mpiexec`` / ``aprun`` on PBS, palsd on each node) on a rank that ended: ``nid001234:
rank 7 died from signal 9`` (``… and dumped core`` where it left one), ``x1000c0s1b0n0: rank 3 exited with
code 1``, its node's name first."""

_ERRORCODE = re.compile(r"(?:with errorcode|Errorcode:)\s{0,10}(?P<code>-?\d{1,10})")
_RANK_NODE = re.compile(
    r"process rank (?P<rank>\d{1,7}) with (?:PID|OID) \d{1,10} on\s{1,10}node (?P<host>[^\s,]{1,253})"
)
_PROCESS_NAME = re.compile(
    r"Process name:\s{0,10}(?:\[(?:\[\d{1,10},\d{1,10}\]|[^\],]{0,100}),(?P<rank>\d{1,7})\]\]?"
    r"|(?P<bare>\d{1,7})\s{0,8}$)"
)
"""Open MPI's ``[[jobid,1],rank]``, or Horovod's launcher repeating mpirun's words with the bare rank."""
_EXIT_CODE = re.compile(r"Exit code:\s{0,10}(?P<code>-?\d{1,10})")
_RANK_AT = re.compile(r"RANK (?P<rank>\d{1,7}) PID \d{1,10} RUNNING AT (?P<host>\S{1,253})")
_PID_AT = re.compile(r"PID \d{1,10} RUNNING AT (?P<host>\S{1,253})")
_KILLED_BY = re.compile(r"KILLED BY SIGNAL: (?P<signal>\d{1,3})(?: \((?P<name>[^)]{1,40})\))?")
_EXIT_STATUS = re.compile(r"EXIT (?:CODE|STATUS): (?P<code>-?\d{1,10})")


_IMPROPER_OMPI = re.compile(r"\b(?:mpirun|mpiexec|orterun|prterun) has exited due to process rank \d")
_IMPROPER_WHY = re.compile(
    r"has exited due to process rank (?P<rank>\d{1,7}) with PID \d{1,10} on\s{1,10}"
    r"(?:\d\d:\d\d:\d\d\s{1,8})?node (?P<host>\S{1,253}) "
    r"(?P<why>exiting improperly|exiting without calling \"finalize\"|calling \"abort\")"
)
"""Open MPI's (ORTE's, PRRTE's) account of a rank that ended the job without a signal: it left without
``MPI_Finalize`` or called ``abort`` (``mpirun has exited due to process rank 0 with PID 0 on node x
exiting improperly``), the sentence wrapped after ``on`` (a CI runner's clock before the next line)."""
_IMPROPER_WORDS = {
    "exiting improperly": "improperly (without MPI_Finalize, or by an abort mpirun could not tell) and "
    "mpirun ended the job",
    "exiting without calling finalize": "without calling MPI_Finalize and mpirun ended the job",
    "calling abort": "by calling abort and mpirun ended the job",
}
_SRUN_TASK = re.compile(
    r"srun: error: (?P<host>[\w.-]{1,253}): tasks? (?P<task>\d{1,7})[\d,-]{0,200}: "
    r"(?:(?P<aborted>Aborted)|Exited with exit code (?P<code>\d{1,3})"
    r"|(?P<signal>Floating point exception|Illegal instruction|Trace/breakpoint trap))"
)
"""Slurm's srun on a task of the step that aborted (SIGABRT, ``Aborted (core dumped)``), exited non-zero, or
ended by a signal of its own code (a floating-point exception, an illegal instruction, a trap: srun names the
signal as strsignal() does); srun's ``Terminated`` lines after it are the step's cleanup, its ``Segmentation
fault`` a segfault's."""
_SHELL_ABORTED = re.compile(
    r"^\s{0,8}\S{1,300}: line \d{1,6}: {1,4}(?P<pid>\d{1,10}) Aborted(?: {1,30}\(core dumped\))?"
    r"(?: {1,30}(?P<command>\S[^\n]{0,200}?))?\s{0,4}$"
)
"""A shell running a job's script on a command SIGABRT ended (bash's job report: ``/var/spool/slurmd/
job32394/slurm_script: line 21: 199992 Aborted (core dumped) ./jobreport print report``, ``/bin/sh: line 1:
4711 Aborted ./solver``): the program aborted itself (an uncaught C++ exception's ``terminate called …`` /
``what():``, a failed assert); a cause said above it (a CUDA error, std::bad_alloc) is read first."""
_WHAT = re.compile(r"\bwhat\(\): {1,4}(?P<what>\S(?:[^\n ]| (?! |\S{1,300}: line \d)){0,200})")
"""The C++ runtime's account of the uncaught exception it aborts on (``  what():  locale::facet::…``)."""
_SRUN_SIGNALS = {"Floating point exception": 8, "Illegal instruction": 4, "Trace/breakpoint trap": 5}
"""The signal number of each of srun's words for the signal that ended a task."""
_FOAM_ABORT = re.compile(
    r"^\s{0,8}(?:\[\d{1,7}\]\s{0,4})?(?:#\d{1,3}\s{1,4})?Foam::(?P<handler>sigFpe)::sigHandler\(int\)"
    r"|^\s{0,8}(?:\[\d{1,7}\]\s{0,4})?FOAM (?:parallel run )?aborting\b"
)
"""OpenFOAM's runtime ending a solver: its SIGFPE handler printing the stack (``#1
Foam::sigFpe::sigHandler(int)``, under each processor's ``[N]`` in a parallel run: a floating-point
exception trapped, FOAM_SIGFPE), or its error class aborting after a ``FOAM FATAL ERROR`` (``FOAM
aborting``, ``FOAM parallel run aborting``, then ``Foam::error::abort()`` and MPI_Abort). Its SIGSEGV
handler is a segfault's."""
_FOAM_FATAL = re.compile(
    r"FOAM FATAL (?:IO )?ERROR:?\s{0,40}(?:\(openfoam-\d{1,6}\)\s{0,20})?(?:\[\d{1,7}\]\s{1,4})?"
    r"(?P<message>\S[^\n]{0,200}?)(?:\s{3,}|\s{1,4}\[\d{1,7}\]|$)"
)
"""OpenFOAM's fatal error and the first words of its message (the tail's lines joined by spaces: an indented
line after it ends them)."""
_FORTRAN_SIGNAL = re.compile(
    r"^\s{0,8}(?:\[\d{1,7}\]\s{0,4})?Program received signal (?P<signal>SIGFPE|SIGILL|SIGABRT): "
    r"(?P<what>[^\n.]{1,120})"
)
"""GNU Fortran's runtime on a signal of the program's own code (libgfortran's backtrace handler: ``Program
received signal SIGFPE: Floating-point exception - erroneous arithmetic operation.`` then ``Backtrace for
this error:``); its SIGSEGV and SIGBUS are a crash's."""
_ALPS_RANK = re.compile(
    r"\[NID (?P<nid>\d{1,7})\][^\n]{0,200}? PE RANK (?P<rank>\d{1,7}) exit signal "
    r"(?P<signal>Aborted|Floating point exception|Illegal instruction|Killed|Trace/breakpoint trap)\b"
    r"|^\s{0,8}Application \d{1,12} exit codes: (?P<code>[1-9]\d{0,2})\b"
)
"""Cray's ALPS (aprun, its PMI daemon) on a rank of the application that ended: ``_pmiu_daemon(SIGCHLD): [NID
00012] [c0-0c0s3n0] [date] PE RANK 5 exit signal Aborted`` (a crash's signals are a segfault's), and aprun's
summary of the codes its processes ended with (``Application 4412345 exit codes: 134``)."""
_ALPS_SIGNALS = {
    "Aborted": 6,
    "Floating point exception": 8,
    "Illegal instruction": 4,
    "Killed": 9,
    "Trace/breakpoint trap": 5,
}
_FUJITSU_ABORT = re.compile(
    r"\bPLE \d{4} plexec One of MPI processes was aborted\.\s{0,2}\(rank=(?P<rank>\d{1,7})\)"
    r"(?:\(nid=(?P<nid>0x[0-9a-fA-F]{1,16})\))?"
)
"""Fujitsu MPI's process manager (plexec, under the job operation software's pjsub on Fugaku / PRIMEHPC
FX) on a rank that called MPI_Abort: ``[WARN] PLE 0608 plexec One of MPI processes was aborted.(rank=0)
(nid=0xff33000e)(CODE=…)``."""
_SLURM_STEP_FAILED = re.compile(
    r"\*\*\* (?:STEP|JOB) \d{1,12}(?:\.\d{1,6})? ON (?P<host>[\w.-]{1,253}) CANCELLED AT \S{1,40} "
    r"DUE TO TASK FAILURE \*\*\*"
    r"|Terminating (?:job step |StepId=)\d{1,12}\.\d{1,6}; task (?P<task>\d{1,7}) "
    r"exit code (?P<code>\d{1,3}) exited without notification"
)
"""Slurm's step daemon ending a step because one of its tasks failed: the step cancelled for it (``*** STEP
5.0 ON node7 CANCELLED AT 2025-01-02T03:04:05 DUE TO TASK FAILURE ***``, srun's --kill-on-bad-exit), or a
task that exited non-zero without telling it (``Terminating job step 5.0; task 0 exit code 1 exited without
notification``); not a step cancelled by a person, its time limit or the OOM killer (no ``DUE TO TASK
FAILURE``)."""
_IBRUN_EXIT = re.compile(r"\bTACC: {1,2}MPI job exited with code: (?P<code>[1-9]\d{0,2})\b")
"""TACC's ibrun (the MPI launcher of its clusters, over MVAPICH's or Intel MPI's) on the job it started that
ended non-zero (``TACC: MPI job exited with code: 1``)."""
_PMI_ABORT = re.compile(r"^\s{0,8}In: PMI_Abort\(-?\d{1,10}, (?P<detail>[^\n]{1,200}?)\s{0,4}$")
"""MPICH's (MPICH2's) simple PMI client on the abort it passes to the process manager, with the error that
caused it (``In: PMI_Abort(1, Fatal error in PMPI_Comm_rank: Invalid communicator, error stack:``)."""
_LIGHTNING_CHILD = re.compile(
    r"Child process with PID (?P<pid>\d{1,10}) terminated with code (?P<code>-?\d{1,10})\. "
    r"Forcefully terminating all other processes"
)
"""Lightning's observer of the processes it launched: one ended, it kills the others."""
_RAY_ACTOR_DIED = re.compile(
    r"ray\.exceptions\.(?:ActorDiedError|RayActorError): The actor died unexpectedly before finishing"
)
"""Ray on an actor whose worker process died (a Ray Train worker: ``class_name: RayTrainWorker``)."""
_RAY_WORKER = re.compile(r"class_name: (?P<name>\w{1,80})")
_SPAWN_EXIT = re.compile(
    r"\bprocess (?P<proc>\d{1,7}) terminated with "
    r"(?:signal (?P<signal>SIG(?:ABRT|KILL|TERM|INT|FPE|ILL|HUP|PIPE|QUIT|TRAP|USR[12]))\b"
    r"|exit code (?P<code>-?\d{1,10}))"
)
"""torch.multiprocessing's spawn on a process it started that ended (``ProcessExitedException: process 0
terminated with signal SIGABRT``, ``… with exit code 1``); one dead of SIGSEGV or SIGBUS is a crash's."""
_PADDLE_ABORT = re.compile(
    r"ABORT!!! Out of all (?P<of>\d{1,7}) trainers, the trainer process with rank=\[?(?P<rank>\d{1,7})"
    r"[\d, ]{0,200}\]? was aborted"
)
"""PaddlePaddle's launcher (paddle.distributed.launch) on the trainers it watched that ended with an error:
it kills the rest and names the first."""
_PADDLE_CONTAINER = re.compile(
    r"\bContainer rank (?P<rank>\d{1,7}) status failed cmd \[[^\n]{0,600}?\] code (?P<code>-?\d{1,10})\b"
)
"""PaddlePaddle 2.x's launcher (paddle.distributed.launch's controller, its container's summary in
launch/job/container.py: ``Container rank 0 status failed cmd ['python', '-u', 'train.py'] code 1 log
log/workerlog.0``) on a trainer whose process ended with an error: it stops the pod's others; a negative code
is the signal that ended it (Python's Popen)."""
_XGBOOST4J_EXIT = re.compile(
    r"\b(?:Rabit returns|Tracker Process ends) with exit code (?P<code>-?\d{1,10})\b"
)
"""XGBoost4J-Spark's driver on its Rabit tracker, ended when a worker (a Spark task) failed (XGBoost.scala:
``XGBoostSpark: Rabit returns with exit code 1``, RabitTracker's ``Tracker Process ends with exit code 1``),
after which it fails the training (``XGBoostError: XGBoostModel training failed``); 0 is the tracker done."""
_JULIA_WORKER_GONE = re.compile(
    r"^\s{0,8}Worker (?P<worker>\d{1,7}) terminated\.\s{0,4}$"
    r"|\bProcessExitedException\((?P<worker2>\d{1,7})?\)"
)
"""Julia's Distributed on a worker process that ended under it: the master's message handler on the
worker's connection closing (process_messages.jl: ``Worker 2 terminated.``), and the exception a call to
that worker then raises (``ERROR: ProcessExitedException(2)``, ``ProcessExitedException()`` before Julia
1.5), which ``pmap`` and ``@everywhere`` pass on."""
_OMPI_HANDLER_ABORT = re.compile(r"\[(?P<host>[\w.-]{1,253}):\d{1,10}\] Signal: Aborted \(6\)")
"""Open MPI's own signal handler in a rank (opal/util/stacktrace.c, after ``*** Process received signal ***``)
reporting SIGABRT: an assertion or abort() in the rank's code or a library under it (``[node1:4711] Signal:
Aborted (6)``, then ``Signal code:`` and the backtrace)."""
_MPT_RANK = re.compile(
    r"MPT ERROR: (?:MPI_COMM_WORLD )?[Rr]ank:? ?(?P<rank>\d{1,7})(?:\(g:\d{1,7}\))? "
    r"(?:(?P<unfinalized>has terminated without calling MPI_Finalize\(\))"
    r"|is aborting with error code (?P<code>-?\d{1,10}))"
)
"""HPE's (SGI's) MPT on a rank that ended the job: it left without ``MPI_Finalize`` (``MPT ERROR:
MPI_COMM_WORLD rank 3 has terminated without calling MPI_Finalize()``, then ``aborting job``) or called
``MPI_Abort`` (``MPT ERROR: Rank 3(g:3) is aborting with error code 2.``)."""
_CMI_ABORT = re.compile(
    r"-{3,20} (?:Partition \d{1,7} )?Processor (?P<rank>\d{1,7}) Exiting: Called CmiAbort -{3,20}"
)
_CMI_REASON = re.compile(r"^\s{0,8}Reason: (?P<reason>[^\n]{1,200}?)\s{0,4}$")
"""Charm++'s converse layer on a processor (a PE) that called ``CmiAbort`` (the program's ``CkAbort`` or
Charm++'s own checks): ``------------- Processor 3 Exiting: Called CmiAbort ------------`` (with its
partition where the job has several), then ``Reason: …``. A reason its machine layer wrote
(``OFI::LrtsInit::fi_tsend error``, a UCX or verbs call) is the transport's failure, a communication
failure's to read."""
_MACHINE_LAYER = re.compile(r"\bLrts\w{0,40}|\b(?:OFI|UCX|PAMI)::|\bibv_\w{1,40}|\b(?:fi|ucp|uct)_\w{1,30}")
RANK_FAILURE_SIGNS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("abort", _ABORT_OMPI, True),
    ("abort", _ABORT_MPICH, True),
    ("abort", _ABORT_INTEL, True),
    ("internal-abort", _INTERNAL_ABORT_MPICH, True),
    ("abort", _ABORT_NOTE, True),
    ("local-abort", _LOCAL_ABORT_OMPI, True),
    ("errors-are-fatal", _ERROR_IN, True),
    ("signaled", _SIGNALED_OMPI, True),
    ("nonzero", _NONZERO_OMPI, True),
    ("bad-termination", _BAD_TERMINATION, True),
    ("collective-abort", _COLLECTIVE_ABORT, True),
    ("primary-job", _PRIMARY_JOB, True),
    ("elastic", _ELASTIC_ROOT, False),
    ("elastic", _ELASTIC_CHILD, False),
    ("elastic", _ELASTIC_API, False),
    ("deepspeed", _DEEPSPEED_EXIT, False),
    ("deepspeed-kill", _DEEPSPEED_KILLING, False),
    ("glibc-heap", _GLIBC_HEAP, True),
    ("horovod-gloo", _HOROVOD_GLOO_EXIT, True),
    ("pals", _PALS_RANK, True),
    ("mvapich", _MVAPICH_CHILD, True),
    ("lammps", _LAMMPS_ABORT, False),
    ("improper", _IMPROPER_OMPI, True),
    ("srun", _SRUN_TASK, True),
    ("shell-abort", _SHELL_ABORTED, True),
    ("openfoam", _FOAM_ABORT, True),
    ("fujitsu", _FUJITSU_ABORT, True),
    ("gfortran", _FORTRAN_SIGNAL, True),
    ("alps", _ALPS_RANK, True),
    ("slurm-step", _SLURM_STEP_FAILED, True),
    ("ibrun", _IBRUN_EXIT, True),
    ("pmi-abort", _PMI_ABORT, True),
    ("lightning", _LIGHTNING_CHILD, True),
    ("ray", _RAY_ACTOR_DIED, False),
    ("spawn", _SPAWN_EXIT, True),
    ("paddle", _PADDLE_ABORT, True),
    ("paddle", _PADDLE_CONTAINER, True),
    ("xgboost4j", _XGBOOST4J_EXIT, True),
    ("ompi-handler", _OMPI_HANDLER_ABORT, True),
    ("julia", _JULIA_WORKER_GONE, True),
    ("mpt", _MPT_RANK, True),
    ("charm", _CMI_ABORT, True),
)
"""The headlines :func:`rank_failures` starts from, named, and whether the wording always means the
job is ending: mpirun and MPICH's process managers print theirs as they take every rank down;
torch elastic and DeepSpeed restart a failed group where the job allows it."""


@dataclass(frozen=True)
class RankFailure:
    """One rank that aborted, was killed, or exited non-zero.

    ``rank`` is the global rank when the log names it; launchers that only know the local
    rank (torch elastic's agent, DeepSpeed's launcher) give ``local_rank``; Open MPI's
    "Primary job terminated normally, but 1 process returned a non-zero exit code" names none.
    """

    rank: int | None
    how: RankHow
    code: int | None
    signal: str | None
    host: str | None
    lines: tuple[str, ...]
    local_rank: int | None = None
    launcher: str | None = None
    detail: str | None = None
    """Why the rank aborted, where the launcher says more than that it did."""


@lru_cache(maxsize=512)
def rank_failures(tail: tuple[str, ...]) -> tuple[RankFailure, ...]:
    """Every failed rank in ``tail``: aborts first, then those naming a rank, in log order."""
    lines = bounded(tail)
    found: list[RankFailure] = []
    whole = " ".join(lines)
    for i, line in enumerate(lines):
        sign = next((m for _, p, _ in RANK_FAILURE_SIGNS if (m := p.search(line)) is not None), None)
        if sign is not None and is_mention(line, sign.start()):
            continue  # a tip or a setting that names an abort
        after = lines[i + 1 : i + 1 + _CONTEXT_LINES]
        failure = _rank_failure(line, after, whole)
        if failure is not None:
            found.append(failure)
    found.extend(_elastic_failures(lines))
    return tuple(sorted(found, key=lambda f: (f.how != "aborted", f.rank is None and f.local_rank is None)))


def _errors_are_fatal(match: re.Match[str], after: Sequence[str]) -> RankFailure | None:
    """The rank whose MPI call (``match``) returned an error class that ``MPI_ERRORS_ARE_FATAL`` then
    aborted on, from the block's lines ``after`` it (not a local abort's: :data:`_LOCAL_ABORT_OMPI`)."""
    block = after[:6]
    if not any(map(_ERRORS_ARE_FATAL.search, block)) or any(map(_LOCAL_ABORT_OMPI.search, block)):
        return None
    if any(map(_COMMUNICATION_CLASS.search, block)):
        return None  # the message itself failed between the ranks: mpi-comm's
    by = next((m for x in block if (m := _REPORTED_BY.search(x)) is not None), None)
    error = next((m["error"] for x in block if (m := _ERROR_CLASS.search(x)) is not None), "an error")
    detail = (
        f"{match['call']} returned {error}, and the default error handler (MPI_ERRORS_ARE_FATAL) aborted "
        f"the communicator's processes"
    )
    lines = (match.string, *(x for x in block if _STARS_ABORT.search(x) or _ERROR_CLASS.search(x)))
    rank = int(by["rank"]) if by is not None else None
    return RankFailure(rank, "aborted", None, None, None, lines, launcher="Open MPI", detail=detail)


def _fatal_in_ompi(line: str, after: Sequence[str], whole: str) -> RankFailure | None:
    """Open MPI's process aborting the others (``called abort_peers``), or its fatal error handler's block."""
    if (match := _ABORT_PEERS_OMPI.search(line)) is not None:
        return _aborted_peers(match, whole)
    if (match := _ERROR_IN.search(line)) is not None:
        return _errors_are_fatal(match, after)
    return None


def _aborted_peers(match: re.Match[str], whole: str) -> RankFailure:
    """The rank whose process aborted the job's others (Open MPI's ``called abort_peers``), with the MPI call
    whose error the fatal handler reported, where the tail names it."""
    detail = "Open MPI's runtime aborted the job's other processes for it (abort_peers)"
    call = _search_str(_ERROR_IN, whole, "call")
    if call is not None:
        detail = f"{call} failed and {detail}"
    return RankFailure(
        int(match["rank"]), "aborted", None, None, None, (match.string,), launcher="Open MPI", detail=detail
    )


def _rank_failure(line: str, after: Sequence[str], whole: str) -> RankFailure | None:
    """A failed rank announced on ``line``; details come from the lines ``after`` it, and
    the rank's host from anywhere in the tail (Open MPI prints it in a later block)."""
    block = " ".join((line, *after))
    if (match := _ABORT_OMPI.search(line)) is not None:
        rank = int(match.group("rank"))
        code = _search_int(_ERRORCODE, block, "code")
        host = _host_of(rank, _RANK_NODE, whole)
        return RankFailure(rank, "aborted", code, None, host, _lines(line, after, _ERRORCODE))
    if (match := _ABORT_MPICH.search(line) or _ABORT_INTEL.search(line)) is not None:
        return _mpich_abort(match, line, whole)
    if _ABORT_NOTE.search(line) and _ABORT_OMPI.search(whole) is None:
        return RankFailure(None, "aborted", None, None, None, (line,), launcher="Open MPI")
    if (fatal := _fatal_in_ompi(line, after, whole)) is not None:
        return fatal
    if (match := _LOCAL_ABORT_OMPI.search(line)) is not None:
        lines = tuple(x for x in (line, *after[:4]) if _LOCAL_ABORT_OMPI.search(x) or _STARS_ABORT.search(x))
        call = match.group("call") or match.group("call2") or _search_str(_ERROR_IN, whole, "call")
        when = "after MPI_Finalize" if "FINALIZE" in " ".join(lines) else "before MPI_Init"
        detail = f"{call or 'an MPI function'} was called {when}, so Open MPI aborted the process itself"
        return RankFailure(None, "aborted", None, None, None, lines, launcher="Open MPI", detail=detail)
    if "process rank" in line and (match := _SIGNALED_OMPI.search(" ".join((line, *after[:1])))) is not None:
        signal = match.group("signal") + (f" ({match.group('name')})" if match.group("name") else "")
        return RankFailure(int(match.group("rank")), "killed", None, signal, match.group("host"), (line,))
    if _NONZERO_OMPI.search(line) and (name := _process_name(line, after)) is not None:
        rank = int(name.group("rank") or name.group("bare"))
        code = _search_int(_EXIT_CODE, block, "code")
        return RankFailure(rank, "exited", code, None, None, _lines(line, after, _PROCESS_NAME, _EXIT_CODE))
    if _BAD_TERMINATION.search(line) and (at := _RANK_AT.search(block)) is not None:
        killed = _KILLED_BY.search(block)
        how: RankHow = "killed" if killed is not None else "exited"
        code = _search_int(_EXIT_STATUS, block, "code")
        lines = _lines(line, after, _RANK_AT, _KILLED_BY, _EXIT_STATUS)
        return RankFailure(int(at.group("rank")), how, code, _signal(killed), at.group("host"), lines)
    if _BAD_TERMINATION.search(line) and (number := _died_of_signal(after)) is not None:
        at_pid = _PID_AT.search(block)
        lines = _lines(line, after, _PID_AT, _KILLED_BY, _EXIT_STATUS, _EXIT_STRING_SIGNAL)
        return RankFailure(None, "killed", None, str(number), at_pid.group("host") if at_pid else None, lines)
    if (match := _COLLECTIVE_ABORT.search(line)) is not None:
        return _collective_abort(match, line, after)
    if (match := _LAMMPS_ABORT.search(line)) is not None:
        proc = int(match.group("rank")) if match.group("rank") is not None else None
        detail = f"LAMMPS raised MPIAbortException: {match.group('detail').strip()}".rstrip(": ")
        return RankFailure(proc, "aborted", None, None, None, (line,), launcher="LAMMPS", detail=detail)
    if _PRIMARY_JOB.search(line):
        return RankFailure(None, "exited", None, None, None, (line,), launcher="Open MPI")
    if (
        _IMPROPER_OMPI.search(line)
        and (match := _IMPROPER_WHY.search(" ".join((line, *after[:1])))) is not None
    ):
        detail = _IMPROPER_WORDS[match["why"].replace('"', "")]
        lines = (line, *after[:1])
        return RankFailure(
            int(match["rank"]), "exited", None, None, match["host"], lines, launcher="Open MPI", detail=detail
        )
    if (match := _SRUN_TASK.search(line)) is not None:
        return _srun_failure(match, line)
    if (match := _SHELL_ABORTED.search(line)) is not None:
        return _shell_abort(match, line, whole)
    if (match := _LIGHTNING_CHILD.search(line)) is not None:
        return RankFailure(None, "exited", int(match["code"]), None, None, (line,), launcher="Lightning")
    if _RAY_ACTOR_DIED.search(line):
        worker = next((m["name"] for text in after[:3] if (m := _RAY_WORKER.search(text))), "an actor")
        detail = f"(Ray's {worker} actor died unexpectedly: its worker process ended)"
        return RankFailure(None, "exited", None, None, None, (line,), launcher="Ray", detail=detail)
    if (failure := _runtime_abort(line, after, whole)) is not None:
        return failure
    if (failure := _spawned_failure(line) or _step_failure(line)) is not None:
        return failure
    if (failure := _launcher_abort(line, after, whole)) is not None:
        return failure
    if (match := _DEEPSPEED_EXIT.search(line)) is not None and (status := int(match.group("code"))) != 0:
        local = _search_int(_LOCAL_RANK_ARG, line, "local")
        if status < 0:
            return RankFailure(None, "killed", None, str(-status), None, (line,), local, "DeepSpeed")
        return RankFailure(None, "exited", status, None, None, (line,), local, "DeepSpeed")
    return None


def _mpich_abort(match: re.Match[str], line: str, whole: str) -> RankFailure:
    """The rank MPICH's MPID_Abort names on ``line`` (the program's MPI_Abort, or its device's own check
    before the world communicator was set up, whose words are the detail)."""
    groups = match.groupdict()
    rank = int(groups["rank"] or groups["rank2"])
    host = _host_of(rank, _RANK_AT, whole)
    if groups.get("rank2") is None:
        return RankFailure(rank, "aborted", int(groups["code"]), None, host, (line,))
    said = f"{match.group().split(': ')[1]}: {line[match.end() :].strip()}"
    detail = f"MPICH's device aborted it as MPI started ({said})"
    return RankFailure(
        rank, "aborted", int(groups["code2"]), None, host, (line,), launcher="MPICH", detail=detail
    )


def _shell_abort(match: re.Match[str], line: str, whole: str) -> RankFailure:
    """The command the shell reports SIGABRT ended on ``line``, with the C++ runtime's ``what():`` before."""
    command = match["command"] or f"process {match['pid']}"
    what = m["what"] if (m := _WHAT.search(whole)) is not None else None
    why = f", after the uncaught C++ exception what(): {what}" if what else ""
    detail = f"the shell reported {command} Aborted (SIGABRT){why}"
    return RankFailure(None, "aborted", None, None, None, (line,), launcher="the shell", detail=detail)


def _srun_failure(match: re.Match[str], line: str) -> RankFailure:
    """The task srun reports on ``line``: aborted, ended by a signal of its own code, or exited non-zero."""
    task = int(match["task"])
    if match["signal"]:
        number = _SRUN_SIGNALS[match["signal"]]
        return RankFailure(task, "killed", None, str(number), match["host"], (line,), launcher="srun")
    if match["aborted"]:
        detail = f"srun reported task {task} Aborted (SIGABRT)"
        return RankFailure(
            task, "aborted", None, None, match["host"], (line,), launcher="srun", detail=detail
        )
    return RankFailure(task, "exited", int(match["code"]), None, match["host"], (line,), launcher="srun")


def _runtime_abort(line: str, after: Sequence[str], whole: str) -> RankFailure | None:
    """A rank a runtime of its own ended: OpenFOAM's SIGFPE handler or its fatal error's abort, Fujitsu MPI's
    plexec on a rank that called MPI_Abort."""
    if (match := _FOAM_ABORT.search(line)) is not None:
        rank = output_rank(line)
        if match["handler"]:
            detail = (
                "OpenFOAM's sigFpe handler trapped a floating-point exception (a division by zero, an "
                "overflow or a NaN: the solution diverged)"
            )
            return RankFailure(rank, "aborted", None, None, None, (line,), launcher="OpenFOAM", detail=detail)
        fatal = _foam_fatal(whole)
        detail = "OpenFOAM's FOAM FATAL ERROR aborted it" + (f": {fatal}" if fatal else "")
        return RankFailure(rank, "aborted", None, None, None, (line,), launcher="OpenFOAM", detail=detail)
    if (match := _FORTRAN_SIGNAL.search(line)) is not None:
        detail = f"GNU Fortran's runtime caught {match['signal']} ({match['what'].strip()})"
        return RankFailure(
            output_rank(line), "aborted", None, None, None, (line,), launcher="gfortran", detail=detail
        )
    if (match := _ALPS_RANK.search(line)) is not None:
        if match["code"] is not None:
            return RankFailure(None, "exited", int(match["code"]), None, None, (line,), launcher="ALPS")
        number = str(_ALPS_SIGNALS[match["signal"]])
        host = f"nid{match['nid']}"
        return RankFailure(int(match["rank"]), "killed", None, number, host, (line,), launcher="ALPS")
    if (match := _GLIBC_HEAP.search(line)) is not None and any(
        _ABORTED_AFTER.search(later) for later in after[:_HEAP_ABORT_WITHIN]
    ):
        detail = (
            f"glibc's malloc found the heap corrupted ({match['check'].strip()}) and aborted the process "
            f"(SIGABRT)"
        )
        lines = (line, *[x for x in after[:_HEAP_ABORT_WITHIN] if _ABORTED_AFTER.search(x)][:1])
        return RankFailure(
            output_rank(line), "aborted", None, None, None, lines, launcher="glibc", detail=detail
        )
    if (match := _DEEPSPEED_KILLING.search(line)) is not None and not _interrupted_before(line, whole):
        detail = (
            "DeepSpeed's launcher killed the subprocesses it started (its sigkill_handler: a rank of the "
            "node ended with an error, or the launcher was signalled)"
        )
        return RankFailure(None, "aborted", None, None, None, (line,), launcher="DeepSpeed", detail=detail)
    if (match := _FUJITSU_ABORT.search(line)) is not None:
        detail = "Fujitsu MPI's plexec reported it called MPI_Abort" + (
            f" (node {match['nid']})" if match["nid"] else ""
        )
        return RankFailure(
            int(match["rank"]), "aborted", None, None, None, (line,), launcher="Fujitsu MPI", detail=detail
        )
    return None


def _foam_fatal(whole: str) -> str | None:
    """The first words of OpenFOAM's FOAM FATAL ERROR's message, where the tail holds it."""
    match = _FOAM_FATAL.search(whole)
    return match["message"].strip() if match is not None else None


def _step_failure(line: str) -> RankFailure | None:
    """A job a launcher or a process manager ended for a task that failed: Slurm's step daemon, TACC's ibrun,
    MPICH's PMI client."""
    if (match := _SLURM_STEP_FAILED.search(line)) is not None:
        if match["task"] is not None:
            return RankFailure(
                int(match["task"]), "exited", int(match["code"]), None, None, (line,), launcher="Slurm"
            )
        detail = "and Slurm cancelled the step for it (a task failed; srun --kill-on-bad-exit)"
        return RankFailure(
            None, "exited", None, None, match["host"], (line,), launcher="Slurm", detail=detail
        )
    if (match := _IBRUN_EXIT.search(line)) is not None:
        return RankFailure(None, "exited", int(match["code"]), None, None, (line,), launcher="ibrun")
    if (match := _PMI_ABORT.match(line)) is not None:
        why = match["detail"].removesuffix(", error stack:").rstrip(", ")
        detail = f"MPICH's PMI client aborted the job: {why}"
        # its first argument is MPICH's error code for the failure, not a process's exit status
        return RankFailure(None, "aborted", None, None, None, (line,), None, "MPICH", detail)
    return None


def _spawned_failure(line: str) -> RankFailure | None:
    """A process a launcher spawned that ended: torch.multiprocessing's spawn, horovodrun's Gloo launcher,
    HPE's PALS, PaddlePaddle's."""
    if (match := _SPAWN_EXIT.search(line)) is not None:
        proc, name = int(match["proc"]), match["signal"]
        if name is None:
            return RankFailure(
                proc, "exited", int(match["code"]), None, None, (line,), launcher="torch spawn"
            )
        how: RankHow = "aborted" if name == "SIGABRT" else "killed"
        return RankFailure(proc, how, None, name, None, (line,), launcher="torch spawn")
    if (match := _HOROVOD_GLOO_EXIT.search(line)) is not None and (code := int(match["code"])) != 0:
        rank = int(match["rank"])
        if 128 < code < 160:  # its shell's status: 128 + the signal that ended the rank
            return RankFailure(rank, "killed", None, str(code - 128), None, (line,), launcher="horovodrun")
        return RankFailure(rank, "exited", code, None, None, (line,), launcher="horovodrun")
    if (match := _MVAPICH_CHILD.search(line)) is not None and match["code"] != "0":
        rank, host = int(match["rank"]), match["host"]
        if match["signal"] is not None:
            spawned: RankHow = "aborted" if match["signal"] == "6" else "killed"
            return RankFailure(rank, spawned, None, match["signal"], host, (line,), launcher="MVAPICH")
        return RankFailure(rank, "exited", int(match["code"]), None, host, (line,), launcher="MVAPICH")
    if (match := _PALS_RANK.search(line)) is not None and match["code"] != "0":
        rank, host = int(match["rank"]), match["host"]
        if match["signal"] is not None:
            ended: RankHow = "aborted" if match["signal"] == "6" else "killed"
            return RankFailure(rank, ended, None, match["signal"], host, (line,), launcher="PALS")
        return RankFailure(rank, "exited", int(match["code"]), None, host, (line,), launcher="PALS")
    if (match := _PADDLE_ABORT.search(line)) is not None:
        detail = f"PaddlePaddle's launcher found trainers of {match['of']} aborted and stopped the rest"
        return RankFailure(int(match["rank"]), "aborted", None, None, None, (line,), None, "Paddle", detail)
    if (match := _PADDLE_CONTAINER.search(line)) is not None and (code := int(match["code"])) != 0:
        rank = int(match["rank"])
        if code < 0:  # Popen's return code: the signal that ended the trainer
            by: RankHow = "aborted" if code == -6 else "killed"
            return RankFailure(rank, by, None, str(-code), None, (line,), launcher="PaddlePaddle's launcher")
        return RankFailure(rank, "exited", code, None, None, (line,), launcher="PaddlePaddle's launcher")
    if (match := _XGBOOST4J_EXIT.search(line)) is not None and (code := int(match["code"])) != 0:
        detail = (
            f"with code {code} under XGBoost4J-Spark's Rabit tracker (a worker, a Spark task, failed and the "
            f"driver failed the training)"
        )
        return RankFailure(None, "exited", None, None, None, (line,), None, "XGBoost4J-Spark", detail)
    if (match := _JULIA_WORKER_GONE.search(line)) is not None:
        worker = match["worker"] or match["worker2"]
        raised = ", and a call on it raised ProcessExitedException" if match["worker"] is None else ""
        lost = f"worker {worker}" if worker else "a worker"
        detail = f"(Julia's Distributed lost {lost}: its process ended{raised})"
        julia_rank = int(worker) if worker else None
        return RankFailure(
            julia_rank, "exited", None, None, None, (line,), None, "Julia's Distributed", detail
        )
    if (match := _OMPI_HANDLER_ABORT.search(line)) is not None:
        detail = (
            "Open MPI's signal handler in the rank reported SIGABRT: an assertion or abort() in its code or "
            "a library under it (the backtrace below names which)"
        )
        host = match["host"]
        return RankFailure(output_rank(line), "aborted", None, "6", host, (line,), None, "Open MPI", detail)
    return None


def _launcher_abort(line: str, after: Sequence[str], whole: str) -> RankFailure | None:
    """A rank an MPI or a runtime of its own ended the job for: HPE's MPT, Charm++'s ``CmiAbort``, MPICH's
    internal abort (the assertion that failed before it, from anywhere in the tail ``whole``)."""
    if (match := _INTERNAL_ABORT_MPICH.search(line)) is not None:
        asserted = _ASSERTION_MPICH.search(whole)
        where = f" (an assertion failed in {asserted['file']} at line {asserted['line']})" if asserted else ""
        detail = f"MPICH aborted the job itself{where}, not the program's MPI_Abort"
        return RankFailure(int(match["rank"]), "aborted", None, None, None, (line,), None, "MPICH", detail)
    if (match := _MPT_RANK.search(line)) is not None:
        rank = int(match["rank"])
        if match["unfinalized"]:
            detail = "without calling MPI_Finalize, and MPT aborted the job"
            return RankFailure(
                rank, "exited", None, None, None, (line, *after[:1]), launcher="MPT", detail=detail
            )
        detail = "it called MPI_Abort, and MPT ended the job"
        return RankFailure(
            rank, "aborted", int(match["code"]), None, None, (line,), launcher="MPT", detail=detail
        )
    if (match := _CMI_ABORT.search(line)) is not None:
        reason = next((m["reason"] for x in after[:2] if (m := _CMI_REASON.match(x)) is not None), None)
        if reason is not None and _MACHINE_LAYER.search(reason):
            return None
        detail = "Charm++'s CmiAbort ended its processor" + (f" ({reason})" if reason else "")
        lines = (line, *(x for x in after[:2] if _CMI_REASON.match(x)))
        return RankFailure(
            int(match["rank"]), "aborted", None, None, None, lines, launcher="Charm++", detail=detail
        )
    return None


def _process_name(line: str, after: Sequence[str]) -> re.Match[str] | None:
    """The ``Process name:`` line of a non-zero exit's block (a line of its own)."""
    return next((m for text in (line, *after) if (m := _PROCESS_NAME.search(text)) is not None), None)


def _collective_abort(match: re.Match[str], line: str, after: Sequence[str]) -> RankFailure:
    """MPICH's process manager (MPD): ``rank 59 in job 1 host_port caused collective abort``."""
    rank = int(match.group("rank"))
    host = match.group("host") if set(match.group("host")) <= _HOST_CHARS else None
    for status_line in after[:3]:
        status = _RANK_EXIT_STATUS.search(status_line)
        if status is not None and int(status.group("rank")) == rank:
            if status.group("signal") is not None:
                return RankFailure(rank, "killed", None, status.group("signal"), host, (line, status_line))
            return RankFailure(rank, "exited", int(status.group("code")), None, host, (line, status_line))
    return RankFailure(rank, "exited", None, None, host, (line,))


def _elastic_records(lines: Sequence[str]) -> list[tuple[str, Sequence[str]]]:
    """torch elastic's failure records, each as (headline, the lines read with it): under their ``Root
    Cause`` header, or where a log cut the header off, its ``rank : N (local_rank: M)`` field with the
    ``exitcode :`` and ``error_file:`` fields after it (the record whole, as no other program prints it)
    and the fields around them."""
    records = [
        (line, lines[i + 1 : i + 1 + _CONTEXT_LINES])
        for i, line in enumerate(lines)
        if _ELASTIC_ROOT.search(line)
    ]
    if records:
        return records
    return [
        (line, lines[max(0, i - 3) : i + 3])
        for i, line in enumerate(lines[:-1])
        if _RECORD_RANK.match(line)
        and _ELASTIC_EXITCODE.search(lines[i + 1])
        and any(map(_RECORD_ERROR_FILE.match, lines[i + 2 : i + 4]))
    ]


def _elastic_failures(lines: Sequence[str]) -> list[RankFailure]:
    """torch elastic (torchrun): the ``Root Cause`` block of ``ChildFailedError`` (or its record's fields
    where the header was cut off), else the agent's ``failed (exitcode: 1) local_rank: 0`` line, else the
    bare ``ChildFailedError``."""
    found: list[RankFailure] = []
    for line, block in _elastic_records(lines):
        text = " ".join(block)
        rank = _ELASTIC_RANK.search(text)
        code = _search_int(_ELASTIC_EXITCODE, text, "code")
        host = _ELASTIC_HOST.search(text)
        how: RankHow = "killed" if code is not None and code < 0 else "exited"
        evidence = _lines(line, block, _ELASTIC_RANK, _ELASTIC_EXITCODE, _ELASTIC_HOST)
        found.append(
            RankFailure(
                int(rank.group("rank")) if rank is not None else None,
                how,
                code if how == "exited" else None,
                str(-code) if how == "killed" and code is not None else None,
                host.group("host") if host is not None else None,
                evidence,
                int(rank.group("local")) if rank is not None else None,
                "torch elastic",
            )
        )
    if found:
        return found
    for line in lines:
        if (match := _ELASTIC_API.search(line)) is not None:
            code = int(match.group("code"))
            how = "killed" if code < 0 else "exited"
            signal = str(-code) if code < 0 else None
            local = int(match.group("local"))
            found.append(
                RankFailure(
                    None, how, None if code < 0 else code, signal, None, (line,), local, "torch elastic"
                )
            )
    if found:
        return found
    child = next((line for line in lines if _ELASTIC_CHILD.search(line)), None)
    return [RankFailure(None, "exited", None, None, None, (child,), None, "torch elastic")] if child else []


def _signal(match: re.Match[str] | None) -> str | None:
    if match is None:
        return None
    return match.group("signal") + (f" ({match.group('name')})" if match.group("name") else "")


def _host_of(rank: int, pattern: re.Pattern[str], text: str) -> str | None:
    for match in pattern.finditer(text):
        if int(match.group("rank")) == rank:
            return match.group("host")
    return None


def _search_str(pattern: re.Pattern[str], text: str, group: str) -> str | None:
    match = pattern.search(text)
    return match.group(group) if match is not None else None


def _search_int(pattern: re.Pattern[str], text: str, group: str) -> int | None:
    match = pattern.search(text)
    return int(match.group(group)) if match is not None else None


def _lines(headline: str, after: Sequence[str], *patterns: re.Pattern[str]) -> tuple[str, ...]:
    """The headline plus the following lines that supplied details, as evidence."""
    return (headline, *(line for line in after if any(p.search(line) for p in patterns)))


# -------------------------------------------------------------- last error

_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]{0,200}?(?:Error|Exception|Exit|Interrupt|Failure|Fault))(?::|$)"
)
_WRAPPERS = ("ChildFailedError", "CalledProcessError")
_ERRORISH = re.compile(
    r"\b(?:[Ee]rror|ERROR|[Ff]atal|FATAL|[Ff]ailed|FAILED|[Ee]xception|[Aa]bort(?:ed)?|[Kk]illed"
    r"|[Ss]egmentation fault)\b"
)


def python_exception(line: str) -> str | None:
    """``line`` without its output tag if it is a Python exception line (``ValueError: …``)."""
    text = strip_tag(line).rstrip()
    return text if _EXCEPTION.match(text) else None


@lru_cache(maxsize=512)
def last_exception(tail: tuple[str, ...]) -> str | None:
    """The exception that ended the program: the one closing the last traceback (not a
    launcher's wrapper such as ``ChildFailedError`` when a rank's own traceback is there),
    else the last exception line of a traceback whose head was cut off."""
    lines = bounded(tail)
    closing: list[str] = []
    for i, line in enumerate(lines):
        if _TRACEBACK in line:
            exception = next((e for later in lines[i + 1 :] if (e := python_exception(later))), None)
            if exception is not None:
                closing.append(exception)
    for exception in reversed(closing):
        if not exception.split(":", 1)[0].endswith(_WRAPPERS):
            return exception
    if closing:
        return closing[-1]
    return next((e for line in reversed(lines) if (e := python_exception(line))), None)


@lru_cache(maxsize=512)
def last_error(tail: tuple[str, ...]) -> str | None:
    """The line that best says what went wrong: :func:`last_exception`, else the last line
    with an error word in it (``error``, ``fatal``, ``failed``, ``abort``, ``killed``, …)."""
    exception = last_exception(tail)
    if exception is not None:
        return exception
    return next((strip_tag(line).strip() for line in reversed(bounded(tail)) if _ERRORISH.search(line)), None)
