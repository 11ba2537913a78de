"""The local provider with the real bundled model (SmolLM2-135M on llama.cpp), for
the provider contract suite: one model server per test module, one thread, short
answers. Two providers share it: ``local_llm`` answers in at most
``LOCAL_MAX_TOKENS`` tokens, ``local_llm_long`` in up to ``LONG_MAX_TOKENS`` (for
streams a test closes early: it must not finish by itself first)."""
import pytest_asyncio

from trustgraph.model.text_completion.local import provider as local

LOCAL_MAX_TOKENS = 24
LONG_MAX_TOKENS = 2000
CONTEXT = 2048  # tokens per sequence: a prompt of 3,000 words is beyond it


def settings(max_tokens: int) -> local.Settings:
    return local.Settings(tg_local_threads=1, tg_local_context=CONTEXT,
                          tg_local_parallel=2, tg_llm_max_tokens=max_tokens)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local_llm():
    provider = local.make(settings(LOCAL_MAX_TOKENS))
    yield provider
    await provider.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local_llm_long(local_llm):
    """The same model server as ``local_llm``, answering at length."""
    provider = local.LocalProvider(local_llm.process, settings(LONG_MAX_TOKENS))
    yield provider
    await provider.aclose()


async def generating(provider: local.LocalProvider) -> int:
    """Sequences llama.cpp is generating now."""
    return int((await provider.counters())["requests_processing"])


async def predicted(provider: local.LocalProvider) -> int:
    """Tokens llama.cpp has generated since its server started."""
    return int((await provider.counters())["tokens_predicted_total"])
