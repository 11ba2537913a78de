"""What an LLM call's span says (docs/observability.md): OpenTelemetry's GenAI
attributes (``gen_ai.*``) and the OpenInference ones Arize Phoenix reads
(``llm.*``, ``input.value``, ``output.value``), set on text-completion's span
once before the first token and once after the last, never per token. The
prompt is kept bounded; the answer only when it was collected anyway (not
streaming), so a stream keeps nothing per token for its span."""
from opentelemetry.trace import Span

from trustgraph import tracing
from trustgraph.schema import TextCompletionRequest

from .provider import Options, Usage

names = tracing.names


def asked(span: Span | None, provider: str, default_model: str,
          request: TextCompletionRequest, options: Options) -> None:
    if span is None:
        return
    model = options.model or default_model
    span.set_attributes({
        names.GEN_AI_OPERATION: "chat", names.GEN_AI_PROVIDER: provider or "none",
        names.LLM_PROVIDER: provider or "none", names.SPAN_KIND: "LLM",
        names.INPUT: names.bounded(f"{request.system}\n\n{request.prompt}"
                                   if request.system else request.prompt)})
    if model:
        span.set_attribute(names.GEN_AI_REQUEST_MODEL, model)
    if options.max_tokens is not None:
        span.set_attribute(names.GEN_AI_MAX_TOKENS, options.max_tokens)
    if options.temperature is not None:
        span.set_attribute(names.GEN_AI_TEMPERATURE, options.temperature)


def answered(span: Span | None, usage: Usage, text: str | None) -> None:
    """The model that answered and its token counts; ``text``: the whole answer,
    when it was collected (None: streamed)."""
    if span is None:
        return
    if usage.model:
        span.set_attributes({names.GEN_AI_RESPONSE_MODEL: usage.model,
                             names.LLM_MODEL: usage.model})
    counts = {name: value for name, value in (
        (names.GEN_AI_INPUT_TOKENS, usage.in_token),
        (names.GEN_AI_OUTPUT_TOKENS, usage.out_token),
        (names.LLM_PROMPT_TOKENS, usage.in_token),
        (names.LLM_COMPLETION_TOKENS, usage.out_token)) if value is not None}
    if usage.in_token is not None and usage.out_token is not None:
        counts[names.LLM_TOTAL_TOKENS] = usage.in_token + usage.out_token
    span.set_attributes(counts)
    if text is not None:
        span.set_attribute(names.OUTPUT, names.bounded(text))
