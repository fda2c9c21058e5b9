"""Small hand-written files for shapes no real file in ``../shared`` covers.

Each is built from the agent's or framework's published format (field names,
nesting, how ids pair calls with results), not from plait's readers, and says
in its comment what it stands for. Tests write them to a temporary file.
"""

from __future__ import annotations

import json
from typing import Any, Final


def jsonl(rows: list[dict[str, Any]]) -> str:
    """Rows as JSONL text."""
    return "".join(json.dumps(r) + "\n" for r in rows)


T0: Final = "2025-09-01T10:00:00.000Z"

# A Codex rollout whose prompts are only `event_msg` `user_message` lines: the
# `response_item` user messages Codex also writes for them are missing (only the
# environment context is an item). Second command fails with a leading `Exit code:`.
CODEX_EVENT_PROMPTS: Final = jsonl(
    [
        {
            "timestamp": T0,
            "type": "session_meta",
            "payload": {
                "id": "0199a000-0000-7000-8000-000000000001",
                "timestamp": T0,
                "cwd": "/w",
                "originator": "codex_cli_rs",
                "cli_version": "0.50.0",
                "instructions": None,
                "source": "cli",
                "model_provider": "openai",
            },
        },
        {
            "timestamp": T0,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>",
                    }
                ],
            },
        },
        {
            "timestamp": T0,
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "list the files", "images": []},
        },
        {"timestamp": T0, "type": "turn_context", "payload": {"cwd": "/w", "model": "gpt-5-codex"}},
        {
            "timestamp": T0,
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command":["ls"]}',
                "call_id": "call_1",
            },
        },
        {
            "timestamp": T0,
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": '{"output":"a.txt\\n","metadata":{"exit_code":0,"duration_seconds":0.1}}',
            },
        },
        {
            "timestamp": T0,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "One file: a.txt"}],
            },
        },
        {
            "timestamp": T0,
            "type": "event_msg",
            "payload": {"type": "agent_message", "message": "One file: a.txt"},
        },
        {
            "timestamp": T0,
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "delete b.txt", "images": []},
        },
        {
            "timestamp": T0,
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command":["rm","b.txt"]}',
                "call_id": "call_2",
            },
        },
        {
            "timestamp": T0,
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": "Exit code: 1\nWall time: 0.1 seconds\nOutput:\nrm: b.txt: No such file",
            },
        },
    ]
)

# A rollout from before `session_meta` (codex-rs, spring 2025): a bare header
# `{id, timestamp, instructions, git}`, then Responses API items one per line and
# `{"record_type": "state"}` lines between turns.
CODEX_LEGACY: Final = jsonl(
    [
        {
            "id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e",
            "timestamp": "2025-05-20T10:00:00.000Z",
            "instructions": "Keep changes small.",
            "git": {"commit_hash": "abc123", "branch": "main"},
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "fix the failing test"}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Run the tests first."}],
            "encrypted_content": "gAAAAB",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "name": "shell",
            "arguments": '{"command":["pytest","-q"]}',
            "call_id": "call_1",
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": '{"output":"1 failed","metadata":{"exit_code":1,"duration_seconds":0.5}}',
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "test_add fails: 1 + 1 is not 3."}],
        },
    ]
)

# Gemini CLI JSONL recording: a header, a message written again with the same id
# once its tool call finished, and `$set` patch lines.
GEMINI_JSONL: Final = jsonl(
    [
        {
            "sessionId": "g-1",
            "projectHash": "ab" * 32,
            "startTime": T0,
            "lastUpdated": T0,
            "kind": "main",
        },
        {"id": "u1", "timestamp": T0, "type": "user", "content": [{"text": "read a.txt"}]},
        {"$set": {"lastUpdated": T0}},
        {
            "id": "m1",
            "timestamp": T0,
            "type": "gemini",
            "content": "",
            "model": "gemini-2.5-pro",
            "toolCalls": [
                {
                    "id": "read_file_1",
                    "name": "read_file",
                    "args": {"path": "a.txt"},
                    "status": "executing",
                }
            ],
        },
        {
            "id": "m1",
            "timestamp": T0,
            "type": "gemini",
            "content": "",
            "model": "gemini-2.5-pro",
            "toolCalls": [
                {
                    "id": "read_file_1",
                    "name": "read_file",
                    "args": {"path": "a.txt"},
                    "status": "error",
                    "result": [
                        {
                            "functionResponse": {
                                "id": "read_file_1",
                                "name": "read_file",
                                "response": {"error": "File not found: a.txt"},
                            }
                        }
                    ],
                }
            ],
        },
        {
            "id": "m2",
            "timestamp": T0,
            "type": "gemini",
            "content": "a.txt does not exist.",
            "model": "gemini-2.5-pro",
        },
        {"$set": {"lastUpdated": T0, "summary": "read a file"}},
    ]
)

# openai-agents `result.to_input_list()`: an easy input message, a reasoning item,
# two parallel function calls and their outputs, the answer, and a hosted web search.
OPENAI_AGENTS_ITEMS: Final = [
    {"content": "Weather in Tokyo and Osaka?", "role": "user"},
    {
        "id": "rs_1",
        "summary": [{"text": "Call the weather tool for both cities.", "type": "summary_text"}],
        "type": "reasoning",
    },
    {
        "arguments": '{"city":"Tokyo"}',
        "call_id": "call_a",
        "name": "get_weather",
        "type": "function_call",
        "id": "fc_1",
        "status": "completed",
    },
    {
        "arguments": '{"city":"Osaka"}',
        "call_id": "call_b",
        "name": "get_weather",
        "type": "function_call",
        "id": "fc_2",
        "status": "completed",
    },
    {"call_id": "call_a", "output": "Sunny, 22C", "type": "function_call_output"},
    {"call_id": "call_b", "output": "Rain, 18C", "type": "function_call_output"},
    {
        "id": "ws_1",
        "status": "completed",
        "type": "web_search_call",
        "action": {"type": "search", "query": "typhoon warning Osaka"},
    },
    {
        "id": "msg_1",
        "content": [
            {
                "annotations": [],
                "text": "Tokyo is sunny (22C); Osaka has rain (18C).",
                "type": "output_text",
                "logprobs": [],
            }
        ],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    },
]

# pydantic-ai `ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")`:
# a system prompt, two tool calls in one response (args as an object and as a JSON
# string), a tool return with structured content, a retry prompt for a bad call, a
# thinking part, and the final text.
PYDANTIC_AI_MESSAGES: Final = [
    {
        "parts": [
            {
                "content": "Be concise.",
                "timestamp": T0,
                "dynamic_ref": None,
                "part_kind": "system-prompt",
            },
            {
                "content": "What is 2+2, and the weather in Paris?",
                "timestamp": T0,
                "part_kind": "user-prompt",
            },
        ],
        "instructions": None,
        "kind": "request",
    },
    {
        "parts": [
            {"content": "Checking both.", "id": None, "part_kind": "text"},
            {
                "tool_name": "get_weather",
                "args": {"city": "Paris"},
                "tool_call_id": "call_1",
                "id": None,
                "part_kind": "tool-call",
            },
            {
                "tool_name": "calc",
                "args": '{"expression": 4}',
                "tool_call_id": "call_2",
                "id": None,
                "part_kind": "tool-call",
            },
        ],
        "usage": {"input_tokens": 50, "output_tokens": 20},
        "model_name": "gpt-4o",
        "timestamp": T0,
        "kind": "response",
        "provider_name": "openai",
        "provider_details": None,
        "provider_response_id": "chatcmpl-1",
        "finish_reason": "tool_call",
    },
    {
        "parts": [
            {
                "tool_name": "get_weather",
                "content": {"temp_c": 21, "sky": "clear"},
                "tool_call_id": "call_1",
                "metadata": None,
                "timestamp": T0,
                "part_kind": "tool-return",
            },
            {
                "content": [
                    {
                        "type": "string_type",
                        "loc": ["expression"],
                        "msg": "Input should be a valid string",
                        "input": 4,
                    }
                ],
                "tool_name": "calc",
                "tool_call_id": "call_2",
                "timestamp": T0,
                "part_kind": "retry-prompt",
            },
        ],
        "instructions": None,
        "kind": "request",
    },
    {
        "parts": [
            {
                "content": "The expression must be a string.",
                "id": "th_1",
                "signature": None,
                "provider_name": None,
                "part_kind": "thinking",
            },
            {
                "tool_name": "calc",
                "args": {"expression": "2+2"},
                "tool_call_id": "call_3",
                "id": None,
                "part_kind": "tool-call",
            },
        ],
        "usage": {"input_tokens": 90, "output_tokens": 12},
        "model_name": "gpt-4o",
        "timestamp": T0,
        "kind": "response",
        "provider_name": "openai",
    },
    {
        "parts": [
            {
                "tool_name": "calc",
                "content": 4,
                "tool_call_id": "call_3",
                "timestamp": T0,
                "part_kind": "tool-return",
            }
        ],
        "instructions": None,
        "kind": "request",
    },
    {
        "parts": [{"content": "2+2 is 4; Paris is 21C and clear.", "part_kind": "text"}],
        "model_name": "gpt-4o",
        "timestamp": T0,
        "kind": "response",
        "provider_name": "openai",
    },
]

# OpenHands V1 (software-agent-sdk) events for kinds the real file lacks: the system
# prompt, a user message with a skill's extended content, an agent error for a call,
# and a condensation summary.
OPENHANDS_V1_EVENTS: Final = [
    {
        "kind": "SystemPromptEvent",
        "id": "e0",
        "timestamp": "2025-10-30T18:05:40",
        "source": "agent",
        "system_prompt": {"type": "text", "text": "You are OpenHands agent."},
        "tools": [{"type": "function", "function": {"name": "execute_bash"}}],
    },
    {
        "kind": "MessageEvent",
        "id": "e1",
        "timestamp": "2025-10-30T18:05:45",
        "source": "user",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": "run the tests"}]},
        "activated_skills": ["testing"],
        "extended_content": [{"type": "text", "text": "<EXTRA_INFO>use pytest -q</EXTRA_INFO>"}],
    },
    {
        "kind": "ActionEvent",
        "id": "e2",
        "timestamp": "2025-10-30T18:05:50",
        "source": "agent",
        "thought": [{"type": "text", "text": "Running them."}],
        "action": {"kind": "ExecuteBashAction", "command": "pytest -q"},
        "tool_name": "execute_bash",
        "tool_call_id": "call_1",
        "tool_call": {
            "id": "call_1",
            "name": "execute_bash",
            "arguments": '{"command": "pytest -q"}',
            "origin": "completion",
        },
        "llm_response_id": "chatcmpl-1",
    },
    {
        "kind": "AgentErrorEvent",
        "id": "e3",
        "timestamp": "2025-10-30T18:05:51",
        "source": "agent",
        "tool_name": "execute_bash",
        "tool_call_id": "call_1",
        "error": "Command timed out",
    },
    {
        "kind": "CondensationSummaryEvent",
        "id": "e4",
        "timestamp": "2025-10-30T18:06:00",
        "source": "environment",
        "summary": "The tests were run once and timed out.",
    },
    {
        "kind": "ConversationStateUpdateEvent",
        "id": "e5",
        "timestamp": "2025-10-30T18:06:01",
        "source": "environment",
        "key": "execution_status",
        "value": "finished",
    },
]

FILES: Final = {
    "codex/event-prompts.jsonl": CODEX_EVENT_PROMPTS,
    "codex/legacy.jsonl": CODEX_LEGACY,
    "gemini-cli/recording.jsonl": GEMINI_JSONL,
    "openai-agents/items.json": json.dumps(OPENAI_AGENTS_ITEMS, indent=1),
    "openai-agents/items.jsonl": jsonl(OPENAI_AGENTS_ITEMS),
    "pydantic-ai/messages.json": json.dumps(PYDANTIC_AI_MESSAGES, indent=1),
    "openhands/v1-events.json": json.dumps(OPENHANDS_V1_EVENTS, indent=1),
}
"""Every hand-written file, by a path that names its format."""
