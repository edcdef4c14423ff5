"""The project carries its own documentation: no Markdown file links outside the repository,
and every relative link points at a file that exists (anchors are not checked)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_INLINE = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^>\s]+)>")
_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")


def markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "*.md"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    return [ROOT / name.decode() for name in listed if name]


def links(text: str) -> list[str]:
    """The link targets of a Markdown text, code spans and fenced blocks left out."""
    prose = _CODE.sub("", _FENCE.sub("", text))
    return [m.group(1) for pattern in (_INLINE, _AUTOLINK, _DEFINITION) for m in pattern.finditer(prose)]


def test_the_link_finder_sees_every_form_of_link() -> None:
    text = (
        "see [spec](https://a.example/x) and <https://b.example> or [c][c]\n"
        '[c]: https://c.example "title"\n'
        "`[not](https://d.example)`\n```\n[nor](https://e.example)\n```\n[here](docs/api.md#limits)\n"
    )
    assert links(text) == [
        "https://a.example/x",
        "docs/api.md#limits",
        "https://b.example",
        "https://c.example",
    ]


def test_no_markdown_file_links_outside_the_repository() -> None:
    files = markdown_files()
    assert any(f.name == "README.md" for f in files)
    outside = [
        f"{f.relative_to(ROOT)}: {target}"
        for f in files
        for target in links(f.read_text(encoding="utf-8"))
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("//")
    ]
    assert outside == []


def test_every_relative_link_points_at_a_file_of_the_repository() -> None:
    broken = []
    for f in markdown_files():
        for target in links(f.read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue
            resolved = (f.parent / path).resolve()
            if not resolved.exists() or (ROOT not in resolved.parents and resolved != ROOT):
                broken.append(f"{f.relative_to(ROOT)}: {target}")
    assert broken == []
