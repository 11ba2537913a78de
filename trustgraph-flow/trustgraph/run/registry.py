"""Every runnable part by name: ``tg-run <name>`` and ``tg-start`` look here.

Each processor is ``module:SPEC``, its ``ProcessorSpec``; text-completion's spec
depends on the provider its flags or environment name, so it is a function of the
command line. A name not listed but starting ``text-completion-`` runs
text-completion with that provider fixed. The gateway is not a bus processor: it
serves HTTP from a ``main`` of its own.
"""
import importlib
from collections.abc import Callable
from typing import Any

from trustgraph.base import ProcessorSpec

GATEWAY = "gateway"

RUNNABLES = {
    GATEWAY: "trustgraph.gateway.app:main",
    "config": "trustgraph.config.service:SPEC",
    "prompt": "trustgraph.prompt.service:SPEC",
    "librarian": "trustgraph.librarian.service:SPEC",
    "decoder": "trustgraph.ingest.decoder:SPEC",
    "text-completion": "trustgraph.model.text_completion.service:chosen_spec",
    "embeddings": "trustgraph.embeddings.service:SPEC",
    "triples-store": "trustgraph.storage.triples.service:SPEC",
    "vector-store": "trustgraph.storage.vectors.service:SPEC",
    "chunk-embeddings": "trustgraph.ingest.embedding_stages:CHUNK_SPEC",
    "entity-embeddings": "trustgraph.ingest.embedding_stages:ENTITY_SPEC",
    "extract": "trustgraph.extract.service:SPEC",
    "graph-rag": "trustgraph.retrieval.graph_rag.service:SPEC",
    "document-rag": "trustgraph.retrieval.document_rag.service:SPEC",
    "agent": "trustgraph.agent.service:SPEC",
    "lazy-rag": "trustgraph.retrieval.lazy_rag.service:SPEC",
}

# Processors a setting turns off (a bool field of tg-start's settings, e.g.
# ``LazyRagSwitch``'s): while it is false, ``tg-start`` leaves the processor out
# (saying so) and the processor, started anyway, refuses to run.
SWITCHES = {"lazy-rag": "lazy_rag_enabled"}


def switched_off(name: str, settings: object) -> str | None:
    """The variable that turns ``name`` off, when ``settings`` have it off; else None."""
    field = SWITCHES.get(name)
    if field is not None and not getattr(settings, field):
        return field.upper()
    return None


PROVIDER_PREFIX = "text-completion-"


def _target(name: str) -> Any:
    if name not in RUNNABLES:
        known = ", ".join(sorted(RUNNABLES))
        raise SystemExit(f"unknown processor {name!r}; known: {known}, "
                         f"{PROVIDER_PREFIX}<provider>")
    module, attribute = RUNNABLES[name].split(":")
    return getattr(importlib.import_module(module), attribute)


def spec_of(name: str, argv: list[str]) -> ProcessorSpec:
    """The spec of processor ``name``; ``argv`` are its flags (text-completion reads
    the provider from them)."""
    if name.startswith(PROVIDER_PREFIX):
        from trustgraph.model.text_completion.service import spec_for
        return spec_for(name.removeprefix(PROVIDER_PREFIX))
    if name == GATEWAY:
        raise SystemExit("the gateway is not a bus processor")
    target = _target(name)
    spec = target if isinstance(target, ProcessorSpec) else target(argv)
    if not isinstance(spec, ProcessorSpec):
        raise SystemExit(f"{name} cannot run in a process group: {RUNNABLES[name]} "
                         f"names no processor spec")
    return spec


def gateway_main() -> Callable[[list[str] | None], None]:
    return _target(GATEWAY)


# A process group: ``prompt+text-completion`` runs both processors in one process,
# where prompt calls text-completion directly instead of over the bus.
GROUP_SEPARATOR = "+"
# Not a bus processor (it serves HTTP, with a loop of its own): never in a group.
UNGROUPABLE = (GATEWAY,)


def members(entry: str) -> list[str]:
    """The processor names of one ``tg-run`` / TG_PROCESSORS entry: ``a+b`` names a
    process group, a plain name a group of one."""
    names = [name.strip() for name in entry.split(GROUP_SEPARATOR)]
    if len(names) == 1:
        return names
    if not all(names):
        raise ValueError(f"empty name in process group {entry!r}")
    if len(set(names)) < len(names):
        raise ValueError(f"a name appears twice in process group {entry!r}")
    if alone := [name for name in names if name in UNGROUPABLE]:
        raise ValueError(f"{alone[0]} runs in a process of its own, not in a group "
                         f"({entry!r})")
    return names


# The order tg-start stops the parts in: callers before the services they call, so
# that nothing in flight when the stack stops fails for want of a service that
# stopped first (a pipeline record then waits, unacknowledged, for the next start,
# rather than fail a delivery). The gateway (every client's way in) first, so no new
# request comes; then the pipeline's stages, which call the answering group's LLM
# services (LLM extraction), embeddings and the stores; then the answering group;
# then what the others call; config (read by every processor) last.
STOP_ORDER: tuple[tuple[str, ...], ...] = (
    (GATEWAY,),
    ("librarian", "decoder", "extract", "chunk-embeddings", "entity-embeddings"),
    ("agent", "graph-rag", "document-rag", "lazy-rag", "prompt", "text-completion"),
    ("embeddings", "triples-store", "vector-store"),
    ("config",),
)


def stop_waves(parts: list[str]) -> list[list[str]]:
    """``parts`` (TG_PROCESSORS entries) in the waves ``STOP_ORDER`` stops them in,
    empty waves left out: a group in the wave of its earliest member; a processor
    not named there with the services the others call."""
    def wave(name: str) -> int:
        if name.startswith(PROVIDER_PREFIX):
            name = "text-completion"
        found = [n for n, names in enumerate(STOP_ORDER) if name in names]
        return found[0] if found else len(STOP_ORDER) - 2
    waves: list[list[str]] = [[] for _ in STOP_ORDER]
    for part in parts:
        waves[min(wave(name) for name in members(part))].append(part)
    return [parts_of_wave for parts_of_wave in waves if parts_of_wave]


# What ``tg-start`` runs unless TG_PROCESSORS says otherwise: everything, from loading
# documents to answering questions about them. Entries whose module is not installed
# are skipped with a line saying so. The gateway is started alongside the processors
# and stopped before them. Groups share a process where one member calls another on
# every request: each bus hop between processes cost ~1 ms of time-to-first-token
# (prompt, text-completion and the RAG services), or a vector's JSON round trip
# (embeddings and the stages that embed chunks and entities).
DEFAULT_STACK = [
    "config",
    "prompt+text-completion+graph-rag+document-rag+agent+lazy-rag",
    "librarian",
    "decoder",
    "embeddings+chunk-embeddings+entity-embeddings",
    "extract",
    "triples-store",
    "vector-store",
    "gateway",
]
