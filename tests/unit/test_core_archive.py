"""The knowledge-core file: written and read a piece at a time, checked as it is read."""
import io
import json
import tarfile

import pytest

from trustgraph.schema.core_archive import (
    CoreFormatError,
    CoreReader,
    CoreWriter,
    checked_manifest,
    manifest,
    parse_member_name,
)
from trustgraph.schema.cores import (
    CoreTriple,
    lines,
    pack_vectors,
    rows_of,
    unpack_vectors,
)

MEMBERS = [("manifest.json", b'{"format": "trustgraph-core", "version": 1}'),
           ("chunks/000001.jsonl", b'{"chunk_id": "a"}\n' * 700),
           ("chunks/000001.f32", bytes(range(256)) * 40),
           ("triples/000001.jsonl", b"")]


def written(members=MEMBERS) -> bytes:
    writer = CoreWriter()
    return b"".join(writer.member(name, data) for name, data in members) + writer.end()


def test_any_tar_tool_reads_what_is_written():
    with tarfile.open(fileobj=io.BytesIO(written()), mode="r:gz") as tar:
        assert [(m.name, tar.extractfile(m).read()) for m in tar] == MEMBERS


@pytest.mark.parametrize("piece", [1, 7, 512, 100_000])
def test_members_come_out_whole_however_the_stream_is_cut(piece):
    core, reader, found = written(), CoreReader(), []
    for start in range(0, len(core), piece):
        found += reader.feed(core[start:start + piece])
    reader.end()
    assert found == MEMBERS


def test_a_core_made_by_tar_itself_is_read_long_names_included(tmp_path):
    long = "chunks/" + "x" * 150 + ".jsonl"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [("./manifest.json", b"{}"), (long, b"row\n")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        tar.addfile(_directory("docs"))
    reader = CoreReader()
    assert reader.feed(buffer.getvalue()) == [("manifest.json", b"{}"), (long, b"row\n")]
    reader.end()


def _directory(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


@pytest.mark.parametrize("cut, why", [(0.5, "gzip stream is cut short"),
                                      (None, "its tar has no end")])
def test_a_cut_core_is_told_from_a_whole_one(cut, why):
    writer = CoreWriter()
    if cut is None:  # gzip complete, tar not: an export that failed midway
        core = writer.member(*MEMBERS[0]) + writer._gzip.flush()
    else:
        core = written()
        core = core[:int(len(core) * cut)]
    reader = CoreReader()
    reader.feed(core)
    with pytest.raises(CoreFormatError, match=why):
        reader.end()


def test_what_is_not_gzip_or_not_a_tar_is_refused():
    with pytest.raises(CoreFormatError, match="not a gzip-compressed core"):
        CoreReader().feed(b"PK\x03\x04 a zip file")
    writer = CoreWriter()
    not_tar = writer._gzip.compress(b"hello " * 200) + writer._gzip.flush()
    with pytest.raises(CoreFormatError, match="not a tar of a core"):
        CoreReader().feed(not_tar)


def test_the_manifest_names_the_format_and_a_newer_version_is_refused():
    made = manifest("u", "c", "all-MiniLM-L6-v2", 384, {"chunks": 2})
    assert checked_manifest(json.dumps(made).encode()) == made
    with pytest.raises(CoreFormatError, match="version 2; this release reads versions up to 1"):
        checked_manifest(json.dumps({**made, "version": 2}).encode())
    with pytest.raises(CoreFormatError, match="not a knowledge core"):
        checked_manifest(b'{"format": "something else"}')


def test_page_members_are_named_by_part_and_number():
    assert parse_member_name("chunks/000012.f32") == ("chunks", 12, True)
    assert parse_member_name("triples/000001.jsonl") == ("triples", 1, False)
    assert parse_member_name("README.md") is None
    assert parse_member_name("secrets/000001.jsonl") is None


def test_rows_and_vectors_round_trip_exactly_and_bad_ones_say_where():
    rows = [CoreTriple(s="a", p="b", o='"quoted"\nline ü', o_iri=False, document="d")]
    assert rows_of(CoreTriple, lines(rows)) == rows
    with pytest.raises(ValueError, match="line 2"):
        rows_of(CoreTriple, lines(rows) + '{"s": 1}\n')
    vectors = [[0.1, -2.5, 3e-30], [1.0, 0.0, -0.0]]
    packed, dimension = pack_vectors(vectors)
    assert dimension == 3
    assert pack_vectors(unpack_vectors(packed, 2)) == (packed, 3)  # float32, exactly
    assert [[round(x, 6) for x in v] for v in unpack_vectors(packed, 2)] == \
        [[0.1, -2.5, 0.0], [1.0, 0.0, -0.0]]
    with pytest.raises(ValueError, match="do not make 4 vectors"):
        unpack_vectors(packed, 4)
    nan, _ = pack_vectors([[float("nan"), 1.0]])
    with pytest.raises(ValueError, match="not finite"):
        unpack_vectors(nan, 1)
