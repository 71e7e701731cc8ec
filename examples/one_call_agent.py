"""The smallest agent: one call to the model, its answer is the result (openai SDK only).

`make smoke`'s task through the agent endpoint: `python -m rlve.train +experiment=agent_smoke`
trains the tiny model on the vowels task with this agent between the loop and the model.
"""


async def answer(client, task) -> str:
    """Ask the model the task's prompt once and return what it said."""
    response = await client.chat.completions.create(model="rlve-policy", messages=task.prompt)
    return response.choices[0].message.content or ""
