"""The processor runtime: request/response services, pipeline stages, service clients."""
from .config_client import ConfigClient, ConfigWatcher
from .heap import freeze_startup_heap
from .processor import Processor, ProcessorSpec, serve_together
from .prompt_client import PromptClient, PromptResult
from .requester import Requester, RequestTimeout, ServiceError
from .runtime import Clients, Runtime
from .service import BadRequest, Context, HandledError, Service
from .settings import ProcessorSettings, Settings, load_settings
from .stage import Rejected, Stage, StageContext

__all__ = [
    "BadRequest", "Clients", "ConfigClient", "ConfigWatcher", "Context", "HandledError",
    "Processor",
    "ProcessorSettings", "ProcessorSpec", "PromptClient", "PromptResult", "Rejected",
    "RequestTimeout", "Requester", "Runtime", "Service", "ServiceError", "Settings", "Stage",
    "StageContext", "freeze_startup_heap", "load_settings", "serve_together",
]
