"""The provider contract suite's cases: every scripted server module's ``CASES``
(tests/support/*_server.py), and the ``case`` fixture that runs one: its server
started, and a function making its provider (``Retrying``, closed at the end)."""
import importlib
import pkgutil

import pytest

import tests.support
from trustgraph.model.text_completion.choice import provider_module
from trustgraph.model.text_completion.retry import Retrying


def _cases():
    for info in pkgutil.iter_modules(tests.support.__path__):
        if info.name.endswith("_server"):
            yield from importlib.import_module(f"tests.support.{info.name}").CASES


CASES = sorted(_cases(), key=lambda case: case.name)


@pytest.fixture(params=CASES, ids=[case.name for case in CASES])
async def case(request):
    case = request.param
    server = await case.server().start()
    module = provider_module(case.provider)
    settings = module.Settings(**case.settings(server))

    made = []

    def provider(retries: int = 0) -> Retrying:
        made.append(Retrying(module.make(settings), retries, base_delay=0.01))
        return made[-1]

    yield case, server, provider
    for each in made:
        await each.aclose()
    await server.stop()
