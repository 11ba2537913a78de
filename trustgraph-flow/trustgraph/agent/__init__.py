"""The agent (docs/agent.md): ReAct over tools, or route-retrieve-answer, with memory."""
