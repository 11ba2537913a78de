"""Azure OpenAI wire format: the chat-completions SSE of openai_server.py, served at
``/openai/deployments/{deployment}/chat/completions?api-version=...`` to requests
carrying the ``api-key`` header; streams open with Azure's prompt-filter chunk."""
from aiohttp import web

from .openai_server import OpenAiServer


class AzureServer(OpenAiServer):
    model = "gpt-4o-2024-08-06"  # Azure reports the model behind the deployment
    path = "/openai/deployments/{deployment}/chat/completions"
    deployment = "tg-chat"  # the one the provider is configured with
    other_deployment = "tg-chat-large"  # one a request may name instead
    api_key = "azure-test-key"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, str | None]] = []  # (deployment, api-version) each

    def routes(self, app: web.Application) -> None:
        app.router.add_post(self.path, self.check_then_handle)

    async def check_then_handle(self, request: web.Request) -> web.StreamResponse:
        self.calls.append((request.match_info["deployment"], request.query.get("api-version")))
        if request.headers.get("api-key") != self.api_key:
            return self.error_response(401, "missing or wrong api-key header")
        if request.match_info["deployment"] not in (self.deployment, self.other_deployment):
            return self.error_response(404, "The API deployment for this resource does not exist.")
        if not request.query.get("api-version"):
            return self.error_response(404, "Resource not found (no api-version)")
        return await self.handle(request)

    def options(self, body: dict) -> dict:
        """Azure routes by deployment: the model asked for is the one in the path."""
        return {**super().options(body), "model": self.calls[-1][0]}

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await self._event(response, {"choices": [], "created": 0, "id": "", "model": "",
                                     "object": "", "prompt_filter_results": [
                                         {"prompt_index": 0, "content_filter_results": {}}]})
        await self._event(response, self._chunk({"role": "assistant", "content": ""}))
        return response


class Case:
    """How the provider contract suite runs the ``azure`` provider against this server."""

    name = "azure"
    mechanism = "response_format json_schema strict"
    provider = "azure"
    server = AzureServer
    model = AzureServer.model
    asked_model = AzureServer.other_deployment

    @staticmethod
    def settings(server: AzureServer) -> dict:
        return {"azure_openai_endpoint": server.url, "azure_openai_api_key": server.api_key,
                "azure_openai_deployment": server.deployment}


CASES = [Case]
