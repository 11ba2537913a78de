"""The transport's use of pulsar-client internals is checked per version: an unknown
version is refused at start-up with a message saying what to do."""
import pulsar
import pytest

from trustgraph.pubsub import pulsar_shim


def test_the_installed_version_is_one_checked():
    pulsar_shim.check_version(pulsar.__version__)
    pulsar_shim.check_version("3.13.9")


@pytest.mark.parametrize("version", ["3.14.0", "4.0.0", "3.5.0", "13.13"])
def test_an_unknown_version_is_refused_clearly(version):
    with pytest.raises(ImportError) as refused:
        pulsar_shim.check_version(version)
    message = str(refused.value)
    assert f"pulsar-client {version} is not a version" in message
    assert "pulsar_shim.py" in message and "CHECKED" in message


def test_the_message_limit_leaves_room_for_properties():
    assert pulsar_shim.MAX_RECORD_BYTES < pulsar_shim.MESSAGE_LIMIT
