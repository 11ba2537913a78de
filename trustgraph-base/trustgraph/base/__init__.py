"""The processor runtime: request/response services, pipeline stages, service clients."""
from .config_client import ConfigClient, ConfigWatcher
from .heap import freeze_startup_heap
from .processor import Processor, ProcessorSpec, serve_together
from .prompt_client import PromptClient, PromptResult
from .relay import Delta, coalesce, relay
from .requester import Requester
from .rpc import TIMING, RequestTimeout, ServiceError, Timing
from .runtime import Clients, Runtime
from .service import BadRequest, Context, HandledError, Items, Service
from .settings import ProcessorSettings, Settings, load_settings
from .stage import Rejected, Stage, StageContext

__all__ = [
    "TIMING", "BadRequest", "Clients", "ConfigClient", "ConfigWatcher", "Context", "Delta",
    "HandledError", "Items", "Processor", "ProcessorSettings", "ProcessorSpec", "PromptClient",
    "PromptResult", "Rejected", "RequestTimeout", "Requester", "Runtime", "Service",
    "ServiceError", "Settings", "Stage", "StageContext", "Timing", "coalesce",
    "freeze_startup_heap", "load_settings", "relay", "serve_together",
]
