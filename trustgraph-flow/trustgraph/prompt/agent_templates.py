"""The agent's shipped templates (docs/agent.md), part of the prompt defaults.

Variables (all required unless marked optional):

agent-react           question; tools: [{name, description, arguments?: [{name, type,
                      description}]}]; history (optional): [{thought, action,
                      arguments, observation}]; context (optional): earlier turns
                      -> answered under the step schema the agent sends with each
                      request (agent/step_schema.py), streamed
agent-classify        question; history: [{question, answer}]   -> json {route}
agent-reformulate     question; history: [{question, answer}]
agent-knowledge       question; history; documents (optional): [text];
                      knowledge (optional): [{s, p, o}]
agent-code            question; history
agent-conversational  question; history
"""
from typing import get_args

from trustgraph.schema import PromptTemplate
from trustgraph.schema.agent import Route

ROUTES: tuple[str, ...] = get_args(Route)  # what agent-classify may answer

# The conversation so far, as the ask templates show it.
_HISTORY = """\
{% if history %}Conversation so far:
{% for turn in history %}User: {{ turn.question }}
Assistant: {{ turn.answer }}
{% endfor %}
{% endif %}"""

AGENT_REACT = PromptTemplate(
    system=(
        "You are a careful assistant that answers questions by reasoning step by step "
        "and using tools when they help. You reply with one JSON object."),
    prompt="""\
Question: {{ question }}
{% if context is defined and context %}
Earlier in this conversation:
{{ context }}
{% endif %}
Tools:
{% for tool in tools %}- {{ tool.name }}: {{ tool.description }}
{% for argument in tool.get("arguments", []) %}  - argument "{{ argument.name }}" \
({{ argument.type }}): {{ argument.description }}
{% endfor %}{% else %}(no tools are available: answer from what you know)
{% endfor %}
{% if history is defined and history %}Steps so far:
{% for step in history %}
Thought: {{ step.thought }}
Tool: {{ step.action }} {{ step.arguments | json }}
Observation: {{ step.observation }}
{% endfor %}
{% endif %}
Decide the single next step and reply with one JSON object:
- "thought": what you know so far, and what to do next and why;
- "next": either {"tool": <the name of one tool from the list>, "arguments": \
<that tool's arguments>} to use a tool, or {"final_answer": <the complete answer to \
the question>} to answer.

Rules:
- Use only tools from the list, with the arguments they declare.
- Do not repeat a step that is already above with the same arguments.
- Give the final answer as soon as the steps so far are enough. If the tools cannot \
provide what is needed, give the best answer you can and say what is missing.
""")

AGENT_CLASSIFY = PromptTemplate(
    system="You sort users' questions by what answering them needs. You reply with JSON "
           "only: no commentary, no Markdown.",
    prompt=_HISTORY + """\
Latest question: {{ question }}

Which kind of question is the latest one?
- "knowledge": it asks for facts that the user's documents or knowledge graph may \
hold: people, organisations, things, events, what a document says.
- "code": it asks to write, explain, fix or review program code, queries or commands.
- "conversational": greetings, thanks, small talk, or a question about this \
conversation itself, needing no facts looked up.

Reply with a JSON object naming the route and nothing else, for example:
{"route": "knowledge"}
""",
    response_type="json",
    json_schema={"type": "object", "required": ["route"], "additionalProperties": False,
                 "properties": {"route": {"type": "string", "enum": list(ROUTES)}}})

AGENT_REFORMULATE = PromptTemplate(
    system="You rewrite questions so that they can be understood without the "
           "conversation they came from. You reply with the question only.",
    prompt=_HISTORY + """\
Latest question: {{ question }}

Rewrite the latest question as one self-contained question: replace "it", "they", \
"that" and other references to earlier turns with what they refer to, and keep \
every name, number and constraint. If it already stands alone, return it unchanged.

Reply with the question alone on one line: no quotes, no labels, no explanation.
""")

AGENT_KNOWLEDGE = PromptTemplate(
    system=(
        "You answer questions from the evidence you are given, and from nothing else. "
        "You are precise, and honest about what the evidence does not say."),
    prompt=_HISTORY + """\
{% if documents is defined %}Document excerpts:
{% for document in documents %}
[{{ loop.index }}]
{{ document }}
{% else %}
(no excerpts were found)
{% endfor %}
{% endif %}{% if knowledge is defined %}Knowledge statements:
{% for t in knowledge %}- {{ t.s }} | {{ t.p }} | {{ t.o }}
{% else %}(no statements were found)
{% endfor %}
{% endif %}
Question: {{ question }}

Answer from the evidence above only; refer to excerpts by number, like [2], where it \
helps. If the evidence does not contain the answer, say so plainly. Answer directly \
and concisely.
""")

AGENT_CODE = PromptTemplate(
    system="You are an expert programmer. You write correct, idiomatic, minimal code "
           "and explain it briefly.",
    prompt=_HISTORY + """\
Question: {{ question }}

Answer with the code in a fenced block with its language, followed by a short \
explanation of how it works and anything the user must watch out for.
""")

AGENT_CONVERSATIONAL = PromptTemplate(
    system="You are a friendly, concise assistant.",
    prompt=_HISTORY + """\
User: {{ question }}

Reply naturally and briefly, in keeping with the conversation so far.
""")

AGENT_TEMPLATES: dict[str, PromptTemplate] = {
    "agent-react": AGENT_REACT,
    "agent-classify": AGENT_CLASSIFY,
    "agent-reformulate": AGENT_REFORMULATE,
    "agent-knowledge": AGENT_KNOWLEDGE,
    "agent-code": AGENT_CODE,
    "agent-conversational": AGENT_CONVERSATIONAL,
}
