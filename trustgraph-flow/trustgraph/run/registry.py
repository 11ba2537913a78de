"""Every runnable part by name: ``tg-run <name>`` and ``tg-start`` look here.

Each value is ``module:attribute`` naming a ``main(argv)``; a name not listed but
starting ``text-completion-`` runs text-completion with that provider fixed.
"""
import importlib
from collections.abc import Callable

RUNNABLES = {
    "gateway": "trustgraph.gateway.app:main",
    "config": "trustgraph.config.service:main",
    "prompt": "trustgraph.prompt.service:main",
    "librarian": "trustgraph.librarian.service:main",
    "decoder": "trustgraph.decoding.stage:main",
    "text-completion": "trustgraph.model.text_completion.service:main",
    "embeddings": "trustgraph.embeddings.service:main",
    "triples-store": "trustgraph.storage.service_triples:main",
    "vector-store": "trustgraph.storage.service_vectors:main",
    "chunk-embeddings": "trustgraph.embeddings.stages:chunk_main",
    "entity-embeddings": "trustgraph.embeddings.stages:entity_main",
    "extract": "trustgraph.extract.service:main",
    "graph-rag": "trustgraph.retrieval.graph_rag.service:main",
    "document-rag": "trustgraph.retrieval.document_rag.service:main",
}

PROVIDER_PREFIX = "text-completion-"


def main_of(name: str) -> Callable[[list[str] | None], None]:
    if name.startswith(PROVIDER_PREFIX):
        from trustgraph.model.text_completion.service import main_for
        return main_for(name.removeprefix(PROVIDER_PREFIX))
    if name not in RUNNABLES:
        known = ", ".join(sorted(RUNNABLES))
        raise SystemExit(f"unknown processor {name!r}; known: {known}, "
                         f"{PROVIDER_PREFIX}<provider>")
    module, attribute = RUNNABLES[name].split(":")
    return getattr(importlib.import_module(module), attribute)


# A process group: ``prompt+text-completion`` runs both processors in one process,
# where prompt calls text-completion directly instead of over the bus.
GROUP_SEPARATOR = "+"
# Not a bus processor (it serves HTTP, with a loop of its own): never in a group.
UNGROUPABLE = ("gateway",)


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


# What ``tg-start`` runs unless TG_PROCESSORS says otherwise: everything, from loading
# documents to answering questions about them. Entries whose module is not installed
# are skipped with a line saying so. The gateway is started alongside the processors
# and stopped before them. Groups share a process where one member calls another on
# every request: each bus hop between processes cost ~1 ms of time-to-first-token
# (prompt, text-completion and the RAG services), or a vector's JSON round trip
# (embeddings and the stages that embed chunks and entities).
DEFAULT_STACK = [
    "config",
    "prompt+text-completion+graph-rag+document-rag",
    "librarian",
    "decoder",
    "embeddings+chunk-embeddings+entity-embeddings",
    "extract",
    "triples-store",
    "vector-store",
    "gateway",
]
