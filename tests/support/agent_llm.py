"""Scripted LLM replies for the agent's prompts, for a scripted server's ``reply``.

A question's test registers what the model says to it: the ReAct steps (the reply to
the n-th ``agent-react`` call of a dialog is ``steps[n]``, n being how many
observations the prompt already shows), its route, its reformulation. The templates
are told apart by their system prompts, as the shipped defaults have them. A prompt
none of this covers gets the server's scripted tokens.

    replies = AgentReplies()
    replies.react["Who walked"] = [step("need facts", "knowledge-query", question="..."),
                                   final("I know", "Armstrong")]
    llm.reply = replies
"""
import json
from dataclasses import dataclass, field

from trustgraph.prompt.agent_templates import AGENT_TEMPLATES

SYSTEM = {id: template.system for id, template in AGENT_TEMPLATES.items()}


def step(thought: str, tool: str, **arguments) -> str:
    """A ReAct step calling ``tool``, as the step schema shapes it."""
    return json.dumps({"thought": thought, "next": {"tool": tool, "arguments": arguments}})


def final(thought: str, answer: str) -> str:
    """A ReAct step giving the final answer, as the step schema shapes it."""
    return json.dumps({"thought": thought, "next": {"final_answer": answer}})


@dataclass
class AgentReplies:
    react: dict[str, list[str]] = field(default_factory=dict)  # question part -> steps
    routes: dict[str, str] = field(default_factory=dict)  # question part -> route
    reformulated: dict[str, str] = field(default_factory=dict)  # question part -> rewrite
    answers: dict[str, str] = field(default_factory=dict)  # question part -> ask answer

    def __call__(self, text: str) -> str | None:
        if SYSTEM["agent-react"] in text:
            for key, steps in self.react.items():
                if f"Question: {key}" in text:
                    return steps[min(text.count("\nObservation: "), len(steps) - 1)]
            return None
        if SYSTEM["agent-classify"] in text:
            route = _latest(self.routes, text)
            return None if route is None else json.dumps({"route": route})
        if SYSTEM["agent-reformulate"] in text:
            return _latest(self.reformulated, text)
        return _latest(self.answers, text)


def _latest(replies: dict[str, str], text: str) -> str | None:
    """The reply for the question the prompt asks now: the key mentioned last (the
    templates put the conversation so far before the question)."""
    found = [(text.rfind(key), reply) for key, reply in replies.items() if key in text]
    return max(found)[1] if found else None
