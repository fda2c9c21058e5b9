"""Writes the two library-made samples beside this file.

Run in this folder with ``pydantic-ai-slim`` and ``openai-agents`` installed (no model
API is called: both models are scripted here). The samples are small outputs of the
libraries' own serialisers, kept so the readers are tested on what the libraries write:

* ``pydantic-ai_2.68_function-model.json``: pydantic-ai 2.68, ``ModelMessagesTypeAdapter``
  dump of a run whose FunctionModel makes two calls (one with arguments that fail
  validation, so pydantic-ai retries it), thinks, calls again and answers;
* ``openai-agents_0.24_scripted-model.json``: openai-agents 0.24,
  ``result.to_input_list()`` of a run whose Model makes two parallel calls, then answers.
"""

# ruff: noqa
# mypy: ignore-errors


def pydantic_ai_sample() -> None:
    import json
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import (
        ModelMessagesTypeAdapter,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ThinkingPart,
    )
    from pydantic_ai.models.function import FunctionModel, AgentInfo

    calls = {"n": 0}

    def model(messages, info: AgentInfo):
        calls["n"] += 1
        n = calls["n"]
        if n == 1:
            return ModelResponse(
                parts=[
                    TextPart("Checking both."),
                    ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="call_1"),
                    ToolCallPart("calc", '{"expression": 4}', tool_call_id="call_2"),
                ]
            )
        if n == 2:
            return ModelResponse(
                parts=[
                    ThinkingPart("must be a string"),
                    ToolCallPart("calc", {"expression": "2+2"}, tool_call_id="call_3"),
                ]
            )
        return ModelResponse(parts=[TextPart("2+2 is 4; Paris is clear.")])

    agent = Agent(
        FunctionModel(model), system_prompt="Be concise.", instructions="Answer in English."
    )

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        return {"temp_c": 21, "sky": "clear"}

    @agent.tool_plain
    def calc(expression: str) -> int:
        return 4

    r = agent.run_sync("What is 2+2, and the weather in Paris?")
    open("pydantic-ai_2.68_function-model.json", "wb").write(
        ModelMessagesTypeAdapter.dump_json(r.all_messages(), indent=1)
    )


def openai_agents_sample() -> None:
    import asyncio, json
    from agents import Agent, Runner, function_tool, ModelSettings
    from agents.models.interface import Model, ModelTracing
    from agents.items import ModelResponse
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
    )
    from openai.types.responses.response_reasoning_item import Summary

    class Scripted(Model):
        def __init__(self):
            self.n = 0

        async def get_response(
            self,
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            *,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        ):
            self.n += 1
            if self.n == 1:
                out = [
                    ResponseReasoningItem(
                        id="rs_1",
                        type="reasoning",
                        summary=[
                            Summary(
                                text="Call the weather tool for both cities.", type="summary_text"
                            )
                        ],
                    ),
                    ResponseFunctionToolCall(
                        id="fc_1",
                        type="function_call",
                        call_id="call_a",
                        name="get_weather",
                        arguments='{"city":"Tokyo"}',
                        status="completed",
                    ),
                    ResponseFunctionToolCall(
                        id="fc_2",
                        type="function_call",
                        call_id="call_b",
                        name="get_weather",
                        arguments='{"city":"Osaka"}',
                        status="completed",
                    ),
                ]
            else:
                out = [
                    ResponseOutputMessage(
                        id="msg_1",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[
                            ResponseOutputText(
                                type="output_text",
                                text="Tokyo is sunny; Osaka has rain.",
                                annotations=[],
                            )
                        ],
                    )
                ]
            return ModelResponse(output=out, usage=Usage(), response_id=f"resp_{self.n}")

        def stream_response(self, *a, **k):
            raise NotImplementedError

    @function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return {"Tokyo": "Sunny, 22C", "Osaka": "Rain, 18C"}[city]

    async def main():
        agent = Agent(name="w", instructions="Be brief.", tools=[get_weather], model=Scripted())
        r = await Runner.run(agent, "Weather in Tokyo and Osaka?")
        items = r.to_input_list()
        open("openai-agents_0.24_scripted-model.json", "w").write(
            json.dumps(items, indent=1, default=str)
        )

    asyncio.run(main())


if __name__ == "__main__":
    pydantic_ai_sample()
    openai_agents_sample()
