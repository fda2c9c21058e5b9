"""``session.settings``: the session's settings as a read-only mapping, and their verbs.

:class:`SessionSettings` is the settings the row held when it was first read (so
``session.settings["k"]``, ``dict(session.settings)`` and ``== {...}`` read as a
dict does), plus the verbs that change them, the model settings and limits, the
row's metadata and self-compaction (:mod:`~plait.session.settings`,
:mod:`~plait.session.runs`, :mod:`~plait.session.context`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from plait.context import ModelInfo, ModelLimits
from plait.errors import InvalidArgumentError
from plait.providers import ModelSettings
from plait.records import JSONLike, JSONValue
from plait.session import context, runs, settings
from plait.session._part import Part

if TYPE_CHECKING:
    from plait.session.session import Session

__all__ = ["SessionSettings"]


class SessionSettings(Part, Mapping[str, JSONValue]):
    """The session settings (inherited by branches), read-only, and the verbs that set them.

    Reached as ``session.settings``: the mapping reads the settings once, when it is
    first read; :meth:`set` and the other setters write them, and the mapping reads
    them again after.

    Args:
        session: the handle the part was reached from.
    """

    __slots__ = ("_values",)

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._values: dict[str, JSONValue] | None = None

    @property
    def _read(self) -> dict[str, JSONValue]:
        # Read on first use, so a part got only to call a setter reads nothing first.
        if self._values is None:
            self._values = self._head.settings()
        return self._values

    # -- the mapping ------------------------------------------------------------------------

    def __getitem__(self, key: str) -> JSONValue:
        return self._read[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read)

    def __len__(self) -> int:
        return len(self._read)

    def __repr__(self) -> str:
        return f"SessionSettings({self._read!r})"

    def _write(self, **values: JSONLike) -> None:
        settings.set_settings(self._head, **values)
        self._values = None

    # -- settings ---------------------------------------------------------------------------

    def set(self, **values: JSONLike) -> None:
        """Store session settings that branches inherit.

        Args:
            **values: the settings to change; a value of None removes the key.

        Raises:
            InvalidArgumentError: a value that is not JSON, or a bad known setting.
        """
        self._write(**values)

    @property
    def model_settings(self) -> ModelSettings:
        """The model settings the session keeps (a run's settings are laid over them)."""
        return runs.stored_model_settings(self._read)

    def set_model_settings(
        self, model_settings: ModelSettings | Mapping[str, JSONValue] | None
    ) -> None:
        """Replace the model settings the session keeps.

        Args:
            model_settings: the settings, or None to keep none.

        Raises:
            UnknownOptionError: a key that is not a setting.
            InvalidArgumentError: a bad value.
        """
        found = ModelSettings.from_json(model_settings) if model_settings is not None else None
        value = found.to_json() if found is not None else {}
        self._write(**{runs.MODEL_SETTINGS: value or None})

    def model_info(
        self,
        model: str | None = None,
        *,
        declared: ModelLimits | Mapping[str, JSONValue] | None = None,
    ) -> ModelInfo:
        """What is known of ``model`` here: window, output limit, tokenizer, and from where.

        The session's ``model_info`` setting wins, then ``PLAIT_CONTEXT_WINDOW`` and the
        other variables of :data:`plait.context.LIMITS_ENV`, then ``declared`` (what the
        model's server says), then the family table.

        Args:
            model: the model (None: the newest reply's model).
            declared: what the model's server declares of it.

        Returns:
            The model's limits and where each came from.

        Raises:
            InvalidArgumentError: an environment variable holds a bad limit.
        """
        return context.known_model(self._head, model, declared)

    # -- metadata ---------------------------------------------------------------------------

    @property
    def metadata(self) -> dict[str, JSONValue]:
        """The session's stored metadata: settings, provenance, close status (a copy)."""
        return dict(self._head.fresh().metadata) if self._head.row is not None else {}

    def set_metadata(self, key: str, value: JSONLike) -> None:
        """Store one top-level metadata value; branches do not inherit it.

        Args:
            key: the metadata key.
            value: a JSON value, or None to remove the key.

        Raises:
            InvalidArgumentError: a blank key, ``settings``, or a value that is not JSON.
        """
        settings.set_metadata(self._head, key, value)

    # -- self-compaction --------------------------------------------------------------------

    @property
    def self_compaction_choice(self) -> bool | None:
        """The session's own choice: True, False, or None to follow the configuration."""
        return settings.self_compaction(self._read)[0]

    @property
    def self_compaction(self) -> bool:
        """Whether self-compaction is in force: the choice, else ``PLAIT_SELF_COMPACTION``."""
        return settings.self_compaction(self._read)[1]

    def use_self_compaction(self, choice: bool | None) -> None:
        """Choose whether this session may compact itself.

        Args:
            choice: True, False, or None to follow the configuration.

        Raises:
            InvalidArgumentError: ``choice`` is not a bool or None.
        """
        if choice is not None and not isinstance(choice, bool):
            raise InvalidArgumentError(f"self-compaction is True, False or None, not {choice!r}")
        self._write(self_compaction=choice)
