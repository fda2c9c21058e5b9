"""Where tools run: backends, and the reference-counted sandbox handles sessions hold.

A session holds a *target* (a backend name and an optional spec) and opens a
:class:`Sandbox` handle only when one is needed (seed 000): ``to("local")``
opens nothing; ``require_sandbox()`` or ``with session:`` does. Branches made
while a handle is open share it and bump its reference count; the handle closes
when the last holder lets go.
"""

from plait.sandbox.base import Backend, Sandbox, backend_named, register_backend
from plait.sandbox.local import LocalBackend

__all__ = ["Backend", "LocalBackend", "Sandbox", "backend_named", "register_backend"]
