"""Topic names (PROTOCOL §4). Flow ids are part of every name, so flows are isolated."""

TENANT_NAMESPACE = "tg"

CANCEL_TOPIC = f"non-persistent://{TENANT_NAMESPACE}/control/cancel"


def request_topic(service: str, flow: str) -> str:
    return f"non-persistent://{TENANT_NAMESPACE}/request/{service}:{flow}"


def response_topic(service: str, flow: str, requester: str) -> str:
    return f"non-persistent://{TENANT_NAMESPACE}/response/{service}:{flow}:{requester}"


def flow_topic(stage: str, flow: str) -> str:
    return f"persistent://{TENANT_NAMESPACE}/flow/{stage}:{flow}"

# Each processor's periodic state record (``schema/state.py``); gateways listen.
STATE_TOPIC = f"non-persistent://{TENANT_NAMESPACE}/control/state"
