"""How tests/support/doc_examples.py reads the commands out of a document, and what
it refuses to leave unclassified."""
from pathlib import Path

import pytest

from tests.support import doc_examples
from tests.support.doc_examples import examples, run, unclassified

DOC = '''# Title

```sh
make run     # what it does
tg-eval q.jsonl -C papers --compare a=1 \\
        "b=2,c=3"
tg-set-prompt --id p --prompt 'two
lines'
```

* In a list:
  ```console
  $ tg-show-graph -p http://x/y#label --limit 2
  <a> <b> "c" .
  $ tg-show-config
  {"version": 1}
  ```

```text
tg-invoke-llm [options] [system] prompt
tg-show-tools
tg-x: what it printed
```

```json
{"not": "run"}
```
'''


@pytest.fixture
def doc(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    path = tmp_path / "doc.md"
    path.write_text(DOC)
    return path


def test_commands_are_read_as_typed_with_their_lines(doc):
    assert [(e.line, e.command) for e in examples(doc)] == [
        (4, "make run     # what it does"),
        (5, 'tg-eval q.jsonl -C papers --compare a=1 \\\n        "b=2,c=3"'),
        (7, "tg-set-prompt --id p --prompt 'two\nlines'"),
        (13, "tg-show-graph -p http://x/y#label --limit 2"),  # output lines skipped
        (15, "tg-show-config")]
    assert unclassified(doc) == []  # a synopsis block may hold a bare command


def test_a_block_that_does_not_say_what_it_holds_is_refused(doc):
    doc.write_text(DOC + "\n```\ntg-show-config\n```\n")
    assert unclassified(doc) == ["doc.md:30: a fenced block with no info string: sh or "
                                 "console (run by the tests), or text, json, ..."]


def test_commands_hidden_in_a_text_block_are_refused(doc):
    doc.write_text(DOC + "\n```text\n$ tg-show-config\nTG_X=1 tg-start\n```\n")
    [problem] = unclassified(doc)
    assert problem.startswith("doc.md:30: reads like commands to type, in a text block")


def test_a_command_runs_as_bash_would_split_it(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "NAME": "world"}
    ran = run('tg-no-such-command "a b" $NAME # comment', tmp_path, env)
    assert ran.status != 0  # not a tg-* entry point: bash ran it and said so
    assert "tg-no-such-command" in ran.err
    ran = run("echo 'x#y' z#w # gone > /dev/null; echo $NAME", tmp_path, env)
    assert (ran.status, ran.out) == (0, "x#y z#w\n")
