from .bus import DEFAULT_PULSAR_URL, Bus, Message

__all__ = ["DEFAULT_PULSAR_URL", "Bus", "Message"]
