"""The gateway: websocket and REST access to every request/response service."""
