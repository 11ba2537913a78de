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


# What ``tg-start`` runs unless TG_PROCESSORS says otherwise; entries whose module is
# not installed are skipped with a line saying so. The gateway is started alongside
# the processors and stopped before them.
DEFAULT_STACK = ["config", "prompt", "text-completion", "gateway"]
