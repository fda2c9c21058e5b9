"""What a sanitized bundle hides: secrets found by rule, and the caller's own patterns.

:class:`Redactor` walks a bundle's JSON and replaces what a rule matches (private keys,
keys and tokens of known shapes, authorization headers, passwords in URLs, ``name=value``
credential pairs, values under secret-looking keys) or what a caller's pattern
matches, counting what it replaced and where for the bundle's manifest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from plait.errors import InvalidArgumentError
from plait.records import JSONValue

__all__ = ["HOST_PATH", "Redactor", "hide_host_paths", "redaction_patterns"]


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    """When it has a ``secret`` group only that group is replaced, so the label stays."""


def _rule(kind: str, pattern: str, flags: int = 0) -> _Rule:
    return _Rule(kind, re.compile(pattern, flags))


# Order matters: the specific shapes run first so a key is named by its real kind,
# and a value already replaced (``[REDACTED:...]``) matches nothing later.
_RULES: Final[tuple[_Rule, ...]] = (
    _rule(
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
        re.DOTALL,
    ),
    _rule(
        "authorization_header",
        r"\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?"
        r"(?P<secret>(?!\[REDACTED:)[^\s\"',;]+)",
        re.IGNORECASE,
    ),
    _rule("jwt", r"\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}"),
    _rule(
        "bearer_token",
        r"\bbearer\s+(?P<secret>(?!\[REDACTED:)[A-Za-z0-9._~+/=-]{12,})",
        re.IGNORECASE,
    ),
    _rule("anthropic_api_key", r"\bsk-ant-[A-Za-z0-9_-]{12,}"),
    _rule("openai_api_key", r"\bsk-[A-Za-z0-9_-]{16,}"),
    _rule("aws_access_key_id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    _rule("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    _rule("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    _rule("google_api_key", r"\bAIza[0-9A-Za-z_-]{30,}"),
    _rule(
        "url_password",
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"']+:(?P<secret>(?!\[REDACTED:)[^\s@/\"']+)@",
    ),
    _rule(
        "credential_pair",
        r"\b(?:[A-Za-z0-9]+[_-])*(?:password|passwd|secret|token|api[_-]?key|apikey"
        r"|access[_-]?key|private[_-]?key|credentials?)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>(?!\[REDACTED:)[^\s\"'&,;]+)",
        re.IGNORECASE,
    ),
)

_SECRET_KEY: Final = re.compile(
    r"^(?:.*[_-])?(?:password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|authorization|credentials?|cookie)$",
    re.IGNORECASE,
)
"""A mapping key whose string value is a credential as a whole (``{"password": "x"}``)."""


class Redactor:
    """Replaces secrets in strings and counts them by (where, kind) for the manifest."""

    def __init__(self, extra: Iterable[re.Pattern[str]]) -> None:
        self.rules = _RULES + tuple(_Rule("custom", p) for p in extra)
        self.counts: dict[tuple[str, str], int] = {}

    def _note(self, where: str, kind: str, n: int = 1) -> None:
        self.counts[(where, kind)] = self.counts.get((where, kind), 0) + n

    def note(self, where: str, kind: str) -> None:
        """Count one thing hidden by other means than a pattern, for the manifest."""
        self._note(where, kind)

    def text(self, value: str, where: str) -> str:
        for rule in self.rules:
            if not rule.pattern.search(value):
                continue
            found = 0

            def swap(m: re.Match[str], rule: _Rule = rule) -> str:
                nonlocal found
                whole = m.group(0)
                if not whole:
                    return whole  # an empty match (a careless custom pattern) hides nothing
                found += 1
                label = f"[REDACTED:{rule.kind}]"
                if "secret" in rule.pattern.groupindex and m.group("secret") is not None:
                    start, end = m.span("secret")
                    base = m.start()
                    return whole[: start - base] + label + whole[end - base :]
                return label

            value = rule.pattern.sub(swap, value)
            if found:
                self._note(where, rule.kind, found)
        return value

    def walk(self, value: JSONValue, where: str) -> JSONValue:
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, list):
            return [self.walk(v, f"{where}/{i}") for i, v in enumerate(value)]
        if isinstance(value, dict):
            out: dict[str, JSONValue] = {}
            for key, v in value.items():
                path = f"{where}/{_escape(key)}"
                clean_key = self.text(key, f"{path}#key")
                if isinstance(v, str) and v and _SECRET_KEY.match(key) and "[REDACTED:" not in v:
                    # The key says the whole value is a credential, whatever it looks like.
                    self._note(path, "credential_value")
                    out[clean_key] = "[REDACTED:credential_value]"
                else:
                    out[clean_key] = self.walk(v, path)
            return out
        return value

    def manifest(self) -> list[JSONValue]:
        return [
            {"where": where, "kind": kind, "count": n}
            for (where, kind), n in sorted(self.counts.items())
        ]


HOST_PATH = "[REDACTED:host_path]"
"""What a host folder a session's settings name becomes in a shared bundle."""


def hide_host_paths(metadata: dict[str, Any], redactor: Redactor) -> None:
    """Replace the host folders ``metadata["settings"]`` names, noting each in the manifest.

    A session keeps where it ran on this machine: its sandbox's spec (a folder), its
    workspace anchor and its mounted roots' paths. None of it is the conversation, and
    all of it says who ran it where (a user name in a home folder): a bundle made to be
    shared carries ``[REDACTED:host_path]`` instead.
    """
    settings = metadata.get("settings")
    if not isinstance(settings, dict):
        return
    base = "session/metadata/settings"
    sandbox = settings.get("sandbox")
    if isinstance(sandbox, dict) and isinstance(sandbox.get("spec"), str):
        sandbox["spec"] = HOST_PATH
        redactor.note(f"{base}/sandbox/spec", "host_path")
    if isinstance(settings.get("workspace_anchor"), str):
        settings["workspace_anchor"] = HOST_PATH
        redactor.note(f"{base}/workspace_anchor", "host_path")
    roots = settings.get("roots")
    if isinstance(roots, list):
        for i, root in enumerate(roots):
            if isinstance(root, dict) and isinstance(root.get("path"), str):
                root["path"] = HOST_PATH
                redactor.note(f"{base}/roots/{i}/path", "host_path")


def _escape(key: str) -> str:
    """A key as a JSON Pointer token (``~`` and ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


def redaction_patterns(redact: object) -> list[re.Pattern[str]]:
    if isinstance(redact, str | bytes) or not isinstance(redact, Iterable):
        raise InvalidArgumentError("redact must be a list of regular expressions")
    out: list[re.Pattern[str]] = []
    for p in redact:
        if isinstance(p, re.Pattern):
            if not isinstance(p.pattern, str):
                raise InvalidArgumentError("redact patterns must be text, not bytes")
            out.append(p)
        elif isinstance(p, str) and p:
            try:
                out.append(re.compile(p))
            except re.error as exc:
                raise InvalidArgumentError(f"redact: bad regular expression {p!r}: {exc}") from exc
        else:
            raise InvalidArgumentError(f"redact: {p!r} is not a regular expression")
    return out
