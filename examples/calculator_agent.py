"""A calculator agent written with the openai SDK, trained by rlve without a change to it.

It is an ordinary tool-calling loop: ask the model, run the `calculate` calls it makes, send the
results back, stop at an answer without a tool call. rlve gives it a client on the run's
endpoint (the base URL and key of its episode's session) and records every token it is served:

    python -m rlve.train +experiment=agent_calculator
    python -m rlve.train +experiment=agent_calculator model=tiny  # the pipeline in minutes

The same function runs against any OpenAI-compatible server:
`await solve(openai.AsyncOpenAI(base_url=..., api_key=...), task)`.
"""

import json

from rlve.envs.calculator import calculate

CALCULATE = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression and return its value.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (12 + 3) * 4"}},
            "required": ["expression"],
        },
    },
}


async def solve(client, task, max_calls: int = 4) -> str:
    """Answer `task.question` (with the task's own instructions), calling the calculator."""
    messages = list(task.prompt)
    for _ in range(max_calls):
        response = await client.chat.completions.create(
            model="rlve-policy", messages=messages, tools=[CALCULATE]
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            try:
                result = calculate(**json.loads(call.function.arguments))
            except Exception as exc:  # the model sees the error and may try again
                result = f"Error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""
