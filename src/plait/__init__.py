"""plait: the session layer for LLM agents.

Durable, branchable, compactable, resumable transcripts, in one Python API::

    from plait import Client

    with Client(".") as client:
        s = client.session
        s.inject({"role": "user", "content": "hello"})
        branch = s.fork()
"""

import typing as _typing

from plait._lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from plait.client import Client
    from plait.run import current_id
    from plait.session import Session, prompt_once, run_session

__version__ = "0.1.0"

# What a user of a session handle needs, and nothing else (D411): the client and the
# handle, the functional forms, and the id a subscriber reads. Everything else has one
# home: errors in plait.errors, records in plait.records, the run's events in plait.run,
# stores in plait.store, auth helpers in plait.auth, live clients in plait.live, importers
# and bundles in plait.interop. `import plait` loads none of them; the first use of a name
# loads its module.
_EXPORTS: dict[str, str] = {
    "Client": "plait.client",
    "current_id": "plait.run",
    "Session": "plait.session",
    "prompt_once": "plait.session",
    "run_session": "plait.session",
}

__all__ = [
    "Client",
    "Session",
    "__version__",
    "current_id",
    "prompt_once",
    "run_session",
]


if not _typing.TYPE_CHECKING:  # type checkers see the imports above, and no catch-all __getattr__
    __getattr__, __dir__ = _lazy_names(__name__, globals(), _EXPORTS)
