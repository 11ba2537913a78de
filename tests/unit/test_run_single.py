"""tg-run: one part by name."""
import pytest

from trustgraph.run.single import main


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"]])
def test_without_a_name_it_lists_the_names(argv, capsys):
    main(argv)
    out = capsys.readouterr().out
    assert out.startswith("usage: tg-run <name>")
    for name in ("gateway", "config", "prompt", "text-completion", "text-completion-<provider>"):
        assert name in out


def test_an_unknown_name_says_which_are_known():
    with pytest.raises(SystemExit, match="unknown processor 'nope'; known: .*config"):
        main(["nope"])


def test_the_flags_after_the_name_belong_to_that_part(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["text-completion-openai", "--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert "--pulsar-url" in out and "--openai-base-url" in out
