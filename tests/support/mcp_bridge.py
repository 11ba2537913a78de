"""``tg-mcp-stdio`` as an MCP host launches it: the parameters for the ``mcp`` SDK's
stdio client, pointed at a gateway (``TRUSTGRAPH_URL``, ``TRUSTGRAPH_TOKEN``)."""
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

TG_MCP_STDIO = Path(sys.executable).with_name("tg-mcp-stdio")


def stdio(url: str, token: str | None = None) -> StdioServerParameters:
    env = {"TRUSTGRAPH_URL": url} | ({"TRUSTGRAPH_TOKEN": token} if token else {})
    return StdioServerParameters(command=str(TG_MCP_STDIO), env=env)
