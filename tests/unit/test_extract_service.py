"""The extract processor's settings: which extractor serves which flow."""
import pytest
from pydantic import ValidationError

from trustgraph.extract.service import ExtractSettings, extractor_choice


@pytest.mark.parametrize("value, expected", [
    ("keyphrase", {"": "keyphrase"}),
    ("llm", {"": "llm"}),
    ("", {"": "nounphrase"}),
    ("papers=llm", {"": "nounphrase", "papers": "llm"}),
    ("nounphrase,old=keyphrase", {"": "nounphrase", "old": "keyphrase"}),
    ("default=llm, news = keyphrase", {"": "llm", "news": "keyphrase"}),
    ("llm,news=keyphrase", {"": "llm", "news": "keyphrase"}),
])
def test_extractor_choice(value, expected):
    assert extractor_choice(value) == expected


def test_the_default_is_the_llm_free_extractor(monkeypatch):
    monkeypatch.delenv("TG_EXTRACTOR", raising=False)
    assert ExtractSettings().tg_extractor == "nounphrase"


def test_an_unknown_extractor_is_refused_at_start(monkeypatch):
    monkeypatch.setenv("TG_EXTRACTOR", "papers=gpt")
    with pytest.raises(ValidationError, match="unknown extractor 'gpt'"):
        ExtractSettings()
