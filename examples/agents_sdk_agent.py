"""The calculator agent written with the OpenAI Agents SDK (`openai-agents`), trained by rlve as
it is: rlve hands it an `openai.AsyncOpenAI` client on the run's endpoint, which the SDK's
chat-completions model takes as its client.

    python -m rlve.train +experiment=agent_calculator \
        env.args.agent.agent=examples.agents_sdk_agent:solve
"""

from agents import (
    Agent,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

from rlve.envs.calculator import calculate as calculate_value

set_tracing_disabled(True)  # the SDK's tracing posts to OpenAI's servers


@function_tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return its value.

    Args:
        expression: numbers joined by + - * / // % ** with parentheses, e.g. "(12 + 3) * 4".
    """
    return calculate_value(expression)


def calculator_agent(client, task) -> Agent:
    """The agent, under the task's own instructions, on the client rlve hands it."""
    return Agent(
        name="calculator",
        instructions=task.prompt[0]["content"],
        model=OpenAIChatCompletionsModel(model="rlve-policy", openai_client=client),
        tools=[calculate],
    )


async def solve(client, task) -> str:
    """Answer `task.question` with the calculator."""
    try:
        result = await Runner.run(calculator_agent(client, task), task.question, max_turns=4)
    except MaxTurnsExceeded:
        return ""  # still calling tools at its fourth turn: no answer, a reward of 0
    return str(result.final_output)
