"""A knowledge core small enough to probe a route with, and a core read back as text:
what the tenancy matrix (tests/integration/test_gateway_tenancy.py) sends to the core
routes and looks for in what they answer."""
import json

from trustgraph.schema.core_archive import MANIFEST, CoreReader, CoreWriter, manifest, member_name

IRI = "http://example.org/"


def knowledge_core() -> bytes:
    """A core of one triple (whoever imports it, into their own collection)."""
    writer = CoreWriter()
    row = {"s": f"{IRI}probe-core", "p": f"{IRI}says", "o": "probe", "o_iri": False,
           "document": "probe-doc"}
    described = manifest("probe", "c", None, 0, {"documents": 0, "chunks": 0,
                                                "entities": 0, "triples": 1})
    return (writer.member(MANIFEST, json.dumps(described).encode())
            + writer.member(member_name("triples", 1), json.dumps(row).encode() + b"\n")
            + writer.end())


def core_text(data: bytes) -> str:
    """A knowledge core's members as text: what it shows of whose data."""
    reader = CoreReader()
    members = reader.feed(data)
    reader.end()
    return "\n".join(body.decode(errors="replace") for _, body in members)
