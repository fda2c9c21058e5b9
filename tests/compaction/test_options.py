"""Seed 003's compact options: every key, unknown keys and bad values fail loud."""

from __future__ import annotations

from typing import Any

import pytest

from plait.compaction import OPTION_KEYS, CompactOptions, parse_options
from plait.errors import InvalidArgumentError, UnknownOptionError


def test_defaults() -> None:
    opts = parse_options(None)
    assert opts == CompactOptions() == parse_options({})
    assert opts.keep_last == 12
    assert opts.compact_strategy is None and opts.hard_limit_strategy is None


def test_the_keys_are_seed_003s() -> None:
    assert set(OPTION_KEYS) == {
        "keep_last", "token_threshold", "tool_output_max_chars", "compact_strategy",
        "hard_limit_tokens", "hard_limit_strategy", "custom_compactor", "mask_callback",
        "compress_callback",
    }  # fmt: skip


def test_every_option_is_accepted() -> None:
    def custom(records: Any, options: Any) -> str:
        return "x"

    def mask(message: Any) -> str:
        return "[masked]"

    def compress(messages: Any) -> Any:
        return messages

    opts = parse_options(
        {
            "keep_last": 3,
            "token_threshold": 1000,
            "tool_output_max_chars": 200,
            "compact_strategy": "custom",
            "hard_limit_tokens": 5000,
            "hard_limit_strategy": "truncate",
            "custom_compactor": custom,
            "mask_callback": mask,
            "compress_callback": compress,
        }
    )
    assert opts.keep_last == 3 and opts.token_threshold == 1000
    assert opts.tool_output_max_chars == 200 and opts.hard_limit_tokens == 5000
    assert opts.compact_strategy == "custom" and opts.hard_limit_strategy == "truncate"
    assert opts.custom_compactor is custom and opts.mask_callback is mask
    assert opts.compress_callback is compress
    assert parse_options(opts) is opts


@pytest.mark.parametrize("strategy", ["llm", "truncate", "observation_mask"])
def test_each_strategy_name(strategy: str) -> None:
    assert parse_options({"compact_strategy": strategy}).compact_strategy == strategy
    assert parse_options({"hard_limit_strategy": strategy}).hard_limit_strategy == strategy


def test_unknown_keys_are_an_error() -> None:
    with pytest.raises(UnknownOptionError) as info:
        parse_options({"keep_last": 2, "keep_first": 1, "strategy": "llm"})
    assert info.value.keys == ["keep_first", "strategy"]
    assert "keep_first" in str(info.value) and "keep_last" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [-1, -12])
def test_negative_keep_last_is_an_error(value: int) -> None:
    with pytest.raises(InvalidArgumentError, match="keep_last"):
        parse_options({"keep_last": value})


@pytest.mark.parametrize(
    "options",
    [
        {"keep_last": None},
        {"keep_last": "3"},
        {"keep_last": True},
        {"keep_last": 2.0},
        {"token_threshold": -5},
        {"tool_output_max_chars": -1},
        {"hard_limit_tokens": "big"},
        {"compact_strategy": "summarize"},
        {"hard_limit_strategy": "drop"},
        {"mask_callback": "not callable"},
        {"compress_callback": 3},
        {"custom_compactor": []},
        {"compact_strategy": "custom"},
        {"hard_limit_strategy": "custom"},
    ],
)
def test_bad_values_are_an_error(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_options(options)


def test_not_a_mapping() -> None:
    with pytest.raises(InvalidArgumentError):
        parse_options([("keep_last", 1)])  # type: ignore[arg-type]


def test_zero_keep_last_is_allowed() -> None:
    assert parse_options({"keep_last": 0}).keep_last == 0
