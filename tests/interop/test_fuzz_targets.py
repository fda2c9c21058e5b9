"""Fuzz targets: each importer and the bundle reader, seeded with the real transcripts.

The seed corpus is every file of ``../shared/fixtures/transcripts/`` (read when the tests
run, never copied into the repository), sorted by the importer that reads it, plus the
hand-written and library-written samples for the formats no real file shows. Each target
mutates a seed (bytes cut or flipped, lines dropped, doubled or swapped, JSON values
replaced at a random path) and asks the same of what comes back:

* only :class:`plait.errors.PlaitError` ever escapes, and a failed import stores nothing;
* the bundle reader agrees with ``json`` on every file ``json`` reads as a bundle, for
  whatever keys it is asked to keep, and refuses (typed) what it cannot read.

The budget is bounded for CI: ``PLAIT_FUZZ_EXAMPLES`` examples per target (default 25);
set it higher for a longer local run.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait import Client
from plait.errors import PlaitError
from plait.interop import FORMATS, export_bundle, import_bundle, read_bundle, seed_from_jsonl
from plait.interop._skim import skim_object
from plait.store import MemoryStore

from ._handmade import FILES
from .conftest import TRANSCRIPTS
from .test_fuzz import _JSON, HANDMADE, LIBRARY_MADE, PLAIT_SAMPLE, _mutate_file, _mutate_line

EXAMPLES = int(os.environ.get("PLAIT_FUZZ_EXAMPLES", "25"))
BUDGET = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Which importer reads each folder of the shared corpus.
FOLDERS: dict[str, str] = {
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini-cli": "gemini-cli",
    "openai-chat": "openai",
    "openhands": "openhands",
    "swe-agent": "swe-agent",
}
_WINDOW = 300
"""Lines of a long JSONL seed one example starts from (a window of it keeps examples fast)."""


Seeds = dict[str, list[tuple[list[bytes], bool]]]
"""Each format's seeds: a file's lines, and whether it is JSONL (a window of it is a file)."""


def _corpus() -> Seeds:
    """Every seed, by format: the real files, then the hand- and library-made samples."""
    seeds: Seeds = {fmt: [] for fmt in FORMATS}
    for folder, fmt in FOLDERS.items():
        for path in sorted((TRANSCRIPTS / folder).iterdir()):
            if not path.is_file() or path.suffix not in (".json", ".jsonl"):
                continue
            data = path.read_bytes()
            if path.suffix == ".json":  # one line per value: mutations then hit one element
                data = json.dumps(json.loads(data), indent=1).encode()
            seeds[fmt].append((data.splitlines(), path.suffix == ".jsonl"))
    for rel, text in FILES.items():
        fmt = next((f for f, rels in HANDMADE.items() if rel in rels), None)
        if fmt is not None:
            seeds[fmt].append((text.encode().splitlines(), rel.endswith(".jsonl")))
    for fmt, names in LIBRARY_MADE.items():
        for name in names:
            made = (Path(__file__).parent / "data" / name).read_bytes().splitlines()
            seeds[fmt].append((made, name.endswith(".jsonl")))
    seeds["plait"].append(([line.encode() for line in PLAIT_SAMPLE.splitlines()], True))
    return seeds


@pytest.fixture(scope="module")
def corpus() -> Seeds:
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"transcript fixtures not found at {TRANSCRIPTS}")
    return _corpus()


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Client]:
    with tempfile.TemporaryDirectory() as ws, Client(ws, store=MemoryStore()) as c:
        yield c


def _count(client: Client) -> int:
    return len(client.sessions.list(1000, all_workspaces=True))


def _seed_window(data: st.DataObject, seed: tuple[list[bytes], bool]) -> list[bytes]:
    lines, jsonl = seed
    if not jsonl or len(lines) <= _WINDOW:
        return lines
    start = data.draw(st.integers(0, len(lines) - _WINDOW), label="window")
    return lines[start : start + _WINDOW]


def test_the_corpus_has_a_seed_for_every_importer(corpus: Seeds) -> None:
    assert sorted(fmt for fmt, seeds in corpus.items() if seeds) == sorted(FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
@BUDGET
@given(data=st.data())
def test_importer_fuzz_target(
    corpus: Seeds, fuzzed: Client, fmt: str, data: st.DataObject
) -> None:
    seed = data.draw(st.sampled_from(corpus[fmt]), label="seed")
    raw = _mutate_file(data, _seed_window(data, seed))
    validate = data.draw(st.booleans(), label="validate")
    before = _count(fuzzed)
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        f.write(raw)
        f.flush()
        try:
            result = seed_from_jsonl(fuzzed, f.name, format=fmt, validate=validate)
        except PlaitError:
            result = None
    if result is None or not result.ok:
        assert _count(fuzzed) == before, "a failed import stored a session"
    else:
        assert result.session_id is not None
        loaded = fuzzed.open(result.session_id)
        assert len(loaded.transcript.records) == result.messages_loaded
        fuzzed.sessions.delete(result.session_id)


# -- the bundle reader ----------------------------------------------------------------


@pytest.fixture(scope="module")
def bundles(corpus: Seeds) -> list[bytes]:
    """Bundles of sessions imported from the corpus, in every mode that can hold them."""
    out: list[bytes] = []
    with tempfile.TemporaryDirectory() as ws, Client(ws, store=MemoryStore()) as c:
        for fmt, seeds in corpus.items():
            for lines, _ in seeds[:3]:
                path = Path(ws) / "seed.jsonl"
                path.write_bytes(b"\n".join(lines))
                result = seed_from_jsonl(c, path, format=fmt, validate=False)
                if not result.ok or result.session_id is None:
                    continue
                session = c.open(result.session_id)
                for mode in ("local", "sanitized", "replay-only"):
                    bundle = export_bundle(session, mode=mode)  # type: ignore[arg-type]
                    out.append(json.dumps(bundle, ensure_ascii=False, indent=1).encode())
    assert out
    return out


_KEEPS = st.sampled_from([None, frozenset(), frozenset({"replay"}), frozenset({"trace", "events"})])


def _mutate_bundle(data: st.DataObject, text: bytes) -> bytes:
    how = data.draw(st.sampled_from(["lines", "value", "section"]), label="bundle-how")
    if how == "lines":
        return _mutate_file(data, text.splitlines())
    value = json.loads(text)
    if how == "section":  # a top-level section replaced: the skimmer's own ground
        key = data.draw(st.sampled_from([*value, "trace", "extra"]), label="key")
        value[key] = data.draw(
            st.one_of(_JSON, st.just([[]] * 50), st.just("]}[{\\\"")), label="section"
        )
        return json.dumps(value).encode()
    line = data.draw(st.sampled_from(text.splitlines()), label="line")
    return text.replace(line, _mutate_line(data, line), 1)


_EMPTY: dict[type, object] = {list: [], dict: {}, str: ""}


def _agrees(raw: bytes, keep: frozenset[str] | None, read: dict[str, Any]) -> None:
    """What the reader kept is what ``json`` reads there; what it skipped stands empty."""
    whole = json.loads(raw)
    assert set(read) == set(whole)
    for key, value in read.items():
        if keep is None or key in keep or key in ("schema", "mode", "session", "transcript"):
            assert value == whole[key], key
        else:
            assert value == _EMPTY.get(type(whole[key])), key


@BUDGET
@given(data=st.data(), keep=_KEEPS)
def test_bundle_reader_fuzz_target(
    bundles: list[bytes], fuzzed: Client, data: st.DataObject, keep: frozenset[str] | None
) -> None:
    raw = _mutate_bundle(data, data.draw(st.sampled_from(bundles), label="bundle"))
    before = _count(fuzzed)
    with tempfile.NamedTemporaryFile(suffix=".bundle.json") as f:
        f.write(raw)
        f.flush()
        try:
            read = read_bundle(f.name, keep=keep)
        except PlaitError:
            read = None
        if read is not None:
            try:
                json.loads(raw)
            except ValueError:
                # Garbage where nothing is kept is skipped unread (D253); a whole read
                # still refuses it.
                assert keep is not None
                with pytest.raises(PlaitError):
                    read_bundle(f.name)
            else:
                _agrees(raw, keep, read)
        try:
            session = import_bundle(fuzzed, f.name)
        except PlaitError:
            assert _count(fuzzed) == before, "a refused bundle stored a session"
        else:
            fuzzed.sessions.delete(session.id)


_OBJECTS = st.dictionaries(st.text(max_size=6), _JSON, max_size=5)


@settings(max_examples=EXAMPLES * 4, deadline=None)
@given(
    value=_OBJECTS,
    keep=st.sets(st.text(max_size=6), max_size=3),
    indent=st.sampled_from([None, 1]),
)
def test_skimming_agrees_with_json(
    value: dict[str, Any], keep: set[str], indent: int | None
) -> None:
    raw = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    skimmed = skim_object(raw, keep)
    assert skimmed.values == {k: v for k, v in value.items() if k in keep}
    assert set(skimmed.kinds) == set(value)


_NEAR_JSON = st.text(alphabet='{}[]",:\\ ab1', max_size=40).map(str.encode)


@settings(max_examples=EXAMPLES * 4, deadline=None)
@given(raw=st.binary(max_size=80) | _NEAR_JSON)
def test_skimming_anything_refuses_with_a_value_error_only(raw: bytes) -> None:
    with contextlib.suppress(ValueError):  # SkimError is one
        skim_object(raw, {"a"})
