"""Query optimisation, asked for per request (PROTOCOL §2 ``optimize-query`` and
``subqueries``): the question rewritten as a search query (``query-rewrite``) and
split into sub-questions (``query-decompose``), both prompts at once.

Retrieval then searches for the rewritten question (or the original) and for each
sub-question, and merges what it finds. The answer is still to the question as the
user asked it: the rewrite is for search, and it drops what search does not need
(politeness, instructions about the answer) but the answer does.
"""
from dataclasses import dataclass, field

from trustgraph.base import HandledError, PromptClient, PromptResult
from trustgraph.base.steps import concurrently, step
from trustgraph.schema import Usage

REWRITE = "query-rewrite"
DECOMPOSE = "query-decompose"
# Searches run at once per request: the rewritten question plus this many sub-questions.
MAX_SUBQUERIES = 10


@dataclass
class Questions:
    query: str  # as asked
    optimized_query: str | None = None  # the rewrite, when asked for
    subqueries: list[str] = field(default_factory=list)  # when asked for
    usage: Usage = field(default_factory=Usage)  # what the optimisation prompts cost

    @property
    def searches(self) -> list[str]:
        """The texts retrieval searches for, each once."""
        return list(dict.fromkeys([self.optimized_query or self.query, *self.subqueries]))

    def count(self, result: PromptResult) -> None:
        self.usage.add(Usage(result.in_token, result.out_token))


async def plan_questions(prompts: PromptClient, query: str, optimize: bool,
                         decompose: bool, error_type: str) -> Questions:
    """The question with its rewrite and sub-questions, as the request asks."""
    questions = Questions(query)
    calls = []
    if optimize:
        calls.append(_rewrite(prompts, questions, error_type))
    if decompose:
        calls.append(_decompose(prompts, questions, error_type))
    await concurrently(*calls)
    return questions


async def _rewrite(prompts: PromptClient, questions: Questions, error_type: str) -> None:
    with step(error_type, f"rewriting the question ({REWRITE})"):
        result = await prompts.invoke(REWRITE, {"query": questions.query})
    questions.count(result)
    # The shipped template answers {"query": ...} under its schema; one edited into
    # a text template answers the query as its text.
    found = result.object.get("query") if isinstance(result.object, dict) else result.text
    # An empty rewrite searches for the question itself rather than for nothing.
    questions.optimized_query = (found if isinstance(found, str) else "").strip() \
        or questions.query


async def _decompose(prompts: PromptClient, questions: Questions, error_type: str) -> None:
    with step(error_type, f"splitting the question ({DECOMPOSE})"):
        result = await prompts.invoke(DECOMPOSE, {"query": questions.query})
    questions.count(result)
    # The shipped template's schema ensures a list of strings; an edited one may not.
    found = result.object
    if not isinstance(found, list) or not all(isinstance(q, str) for q in found):
        raise HandledError(error_type, f"the {DECOMPOSE} prompt answered {found!r}, not "
                                       f"a JSON list of questions: check the template")
    unique = dict.fromkeys(q.strip() for q in found if q.strip())
    questions.subqueries = list(unique)[:MAX_SUBQUERIES]
