"""The import layering holds (tests/support/layering.py, read from every module's AST):
base imports nothing of flow or cli, the gateway imports no processor package and its
core no API module, no import circles between modules or between packages, no upward
imports. The checker itself is held
to planted violations in a small tree of its own, so a rule that stopped finding
anything would fail here."""
from pathlib import Path

import pytest

from tests.support.layering import RULES, circles, forbidden, package_circles, read, upward


def test_the_three_distributions_keep_their_layering():
    graph = read()
    assert len(graph.modules) > 200  # it did read the tree
    assert forbidden(graph) == []
    assert circles(graph) == []
    assert package_circles(graph) == []
    assert upward(graph) == []


# --- the checker, on planted violations ---------------------------------------------------

def plant(root: Path, files: dict[str, str]) -> Path:
    """``files``: "distribution/path.py" → source."""
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


CLEAN = {
    "trustgraph-base/trustgraph/base/__init__.py": "from .steps import step\n",
    "trustgraph-base/trustgraph/base/steps.py": "import asyncio\n",
    "trustgraph-base/trustgraph/schema/__init__.py": "",
    "trustgraph-flow/trustgraph/gateway/__init__.py": "",
    "trustgraph-flow/trustgraph/gateway/core/__init__.py": "from .api import Core\n",
    "trustgraph-flow/trustgraph/gateway/core/api.py": "from trustgraph.base import step\n",
    "trustgraph-flow/trustgraph/gateway/apis/__init__.py": "from . import query\n",
    "trustgraph-flow/trustgraph/gateway/apis/query.py": "from ..core import Core\n",
    "trustgraph-flow/trustgraph/storage/__init__.py": "",
    "trustgraph-flow/trustgraph/storage/settings.py": "",
    "trustgraph-flow/trustgraph/storage/triples/__init__.py": "",
    "trustgraph-flow/trustgraph/storage/triples/store.py": "from ..settings import X\n",
    "trustgraph-flow/trustgraph/storage/triples/service.py": "from .store import S\n",
    "trustgraph-flow/trustgraph/retrieval/__init__.py": "",
    "trustgraph-flow/trustgraph/retrieval/steps.py": "",
    "trustgraph-cli/trustgraph/cli/__init__.py": "",
    "trustgraph-cli/trustgraph/cli/loading.py": "from .load_wait import Waiter\n",
    "trustgraph-cli/trustgraph/cli/load_wait.py": "import trustgraph.base.steps\n",
}


def test_a_clean_tree_breaks_nothing_and_its_imports_are_resolved(tmp_path):
    graph = read(plant(tmp_path, CLEAN))
    assert (forbidden(graph), circles(graph), package_circles(graph), upward(graph)) == \
        ([], [], [], [])
    assert graph.imports["trustgraph.gateway.apis.query"] == {"trustgraph.gateway.core"}
    assert graph.imports["trustgraph.gateway.apis"] == {"trustgraph.gateway.apis.query"}
    assert graph.imports["trustgraph.storage.triples.store"] == {"trustgraph.storage.settings"}
    assert graph.imports["trustgraph.cli.load_wait"] == {"trustgraph.base.steps"}
    assert graph.imports["trustgraph.base"] == {"trustgraph.base.steps"}


@pytest.mark.parametrize("path, source, rule", [
    ("trustgraph-base/trustgraph/base/steps.py", "from trustgraph.cli import loading\n",
     RULES[0].name),
    ("trustgraph-base/trustgraph/schema/__init__.py",
     "def later():\n    from trustgraph.storage.settings import X\n", RULES[0].name),
    ("trustgraph-flow/trustgraph/gateway/core/api.py",
     "from trustgraph.retrieval.steps import step\n", RULES[1].name),
    ("trustgraph-flow/trustgraph/gateway/apis/query.py",
     "from ...retrieval import steps\n", RULES[1].name),
    ("trustgraph-flow/trustgraph/gateway/core/api.py", "from ..apis import query\n",
     RULES[2].name),
    ("trustgraph-flow/trustgraph/gateway/apis/query.py", "from ..core.api import Core\n",
     RULES[3].name),
    ("trustgraph-base/trustgraph/answers/reader.py", "from ..base import steps\n",
     RULES[4].name),
    ("trustgraph-base/trustgraph/api/client.py", "from trustgraph.base.steps import step\n",
     RULES[5].name),
])
def test_a_forbidden_import_is_found(tmp_path, path, source, rule):
    graph = read(plant(tmp_path, {**CLEAN, path: source}))
    [(broken, _)] = forbidden(graph)
    assert broken == rule


def test_a_circle_is_found_even_through_a_lazy_import(tmp_path):
    graph = read(plant(tmp_path, {**CLEAN, "trustgraph-cli/trustgraph/cli/load_wait.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from .loading import Source\n")}))
    assert circles(graph) == [["trustgraph.cli.load_wait", "trustgraph.cli.loading"]]


def test_a_longer_circle_is_one_circle(tmp_path):
    graph = read(plant(tmp_path, {
        **CLEAN,
        "trustgraph-flow/trustgraph/storage/settings.py": "from .triples import service\n"}))
    assert circles(graph) == [["trustgraph.storage.settings", "trustgraph.storage.triples.service",
                               "trustgraph.storage.triples.store"]]


def test_an_upward_import_is_found(tmp_path):
    # storage/triples/service.py climbs to storage/stores.py, which reaches back down.
    graph = read(plant(tmp_path, {
        **CLEAN,
        "trustgraph-flow/trustgraph/storage/stores.py": (
            "def open_store():\n    from .triples.store import S\n"),
        "trustgraph-flow/trustgraph/storage/triples/service.py": (
            "from ..stores import open_store\n")}))
    assert upward(graph) == [("trustgraph.storage.triples.service", "trustgraph.storage.stores")]
    assert circles(graph) == []  # no module imports itself round a loop: only the layers do


def test_a_package_circle_is_found_though_no_module_imports_itself_round_a_loop(tmp_path):
    # A processor's package choosing among provider packages that import its contract:
    # retrieval/service.py -> retrieval/local/provider.py -> retrieval/steps.py.
    graph = read(plant(tmp_path, {
        **CLEAN,
        "trustgraph-flow/trustgraph/retrieval/service.py": "from .local import provider\n",
        "trustgraph-flow/trustgraph/retrieval/local/__init__.py": "",
        "trustgraph-flow/trustgraph/retrieval/local/provider.py": "from ..steps import S\n"}))
    assert circles(graph) == [] and upward(graph) == []
    assert package_circles(graph) == [["trustgraph.retrieval", "trustgraph.retrieval.local"]]
