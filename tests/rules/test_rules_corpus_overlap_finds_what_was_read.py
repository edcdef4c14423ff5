"""A candidate blind set is checked against everything the project has read (``corpus_overlap``)."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest
import yaml

from tests.rules import corpus_overlap
from tests.rules.corpus_replay import HELD_OUT


def _unread_page() -> str:
    """An address made now: not even this file, which the history holds, names it."""
    return f"https://example.org/{uuid4().hex}"


@pytest.fixture(scope="module")
def seen() -> corpus_overlap.Known:
    return corpus_overlap.known()


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ("https://github.com/NVIDIA/nccl/issues/1234", "nvidia/nccl#1234"),
        ("https://www.github.com/NVIDIA/nccl/issues/1234#issuecomment-99", "nvidia/nccl#1234"),
        ("NVIDIA/nccl#1234", "nvidia/nccl#1234"),
        ("https://discuss.pytorch.org/t/nccl-timeout/1234/", "discuss.pytorch.org/t/nccl-timeout/1234"),
        (
            "http://www.mail-archive.com/users@lists.open-mpi.org/msg1.html#top",
            "mail-archive.com/users@lists.open-mpi.org/msg1.html",
        ),
    ],
)
def test_a_page_has_one_key_in_any_form_of_its_address(source: str, key: str) -> None:
    assert corpus_overlap.page(source) == key


def test_every_held_out_entry_is_known_by_its_source(seen: corpus_overlap.Known) -> None:
    held = list(corpus_overlap.entries(HELD_OUT))
    assert held
    unknown = [
        entry["id"]
        for entry in held
        if not any(r.startswith("source") for r in corpus_overlap.flags(entry, seen))
    ]
    assert unknown == []


def test_a_corpus_text_reflowed_under_a_new_address_is_caught_by_its_words(
    seen: corpus_overlap.Known,
) -> None:
    entry = next(iter(corpus_overlap.entries(HELD_OUT)))
    words = " ".join(str(entry["text"]).split())
    reflowed = {"id": "x", "source": _unread_page(), "text": words.replace(" ", "\n", 3)}
    assert corpus_overlap.flags(reflowed, seen) == ["shingle"]


def test_a_new_page_with_new_words_is_blind(seen: corpus_overlap.Known, tmp_path: Path) -> None:
    entry = {
        "id": "x-new",
        "source": _unread_page(),
        "text": " ".join(f"w{uuid4().hex}" for _ in range(12)),
    }
    (tmp_path / "failures.yaml").write_text(yaml.safe_dump([entry]))
    assert corpus_overlap.main([str(tmp_path)]) == 0
    (tmp_path / "near_misses.yaml").write_text(yaml.safe_dump([next(iter(corpus_overlap.entries(HELD_OUT)))]))
    assert corpus_overlap.main([str(tmp_path)]) == 1
