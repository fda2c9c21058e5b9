"""The agent loop on a session: model call, tool calls (with approval), results, until done.

This is the first slice of issue 3: :func:`prompt` runs one request to the end on
a stored session with a given provider. Every step is appended to the transcript
as it happens (the user message, each assistant reply with its tool calls, each
tool result), so the transcript is valid after every step: an assistant's tool
calls are always followed by one result each, and a denied or failed call is a
failed result, never a missing one.
"""

from plait.run.loop import Approval, RunResult, prompt, prompt_once, run_session

__all__ = ["Approval", "RunResult", "prompt", "prompt_once", "run_session"]
