"""plait under the agent frameworks people already run.

Each module adapts one framework's own session or history interface to plait
and is imported on its own (``from plait.integrations.openai_agents import
PlaitSession``); this package imports none of them, so a framework that is not
installed costs nothing until its adapter is used, and then fails with
:class:`plait.errors.MissingDependencyError` naming the extra to install.
The conversation an adapter writes is an ordinary plait session under the same
id: history, context, fork, compaction, export and the web page all read it.
"""
