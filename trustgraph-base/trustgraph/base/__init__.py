"""The processor runtime: request/response services, pipeline stages, service clients."""
from .clients import Clients
from .config_client import ConfigClient, ConfigWatcher
from .exiting import exit_process
from .flows import Flow, FlowParameters, Parameters
from .heap import freeze_startup_heap
from .lanes import BULK, INTERACTIVE, LaneLock, current_lane, queued_until, set_lane
from .processor import Processor, ProcessorSpec, serve_together
from .prompt_client import PromptClient, PromptResult
from .relay import Delta, coalesce, relay
from .requester import Requester, ServiceClient
from .rpc import TIMING, RequestTimeout, ServiceError, Timing
from .runtime import Runtime
from .service import BadRequest, Context, HandledError, Handler, Items, Relay, Service, Yielded
from .settings import ProcessorSettings, Settings, load_settings
from .stage import Rejected, Stage, StageContext, StageHandler, delivery

__all__ = [
    "BULK", "INTERACTIVE", "TIMING", "BadRequest", "Clients", "ConfigClient", "ConfigWatcher",
    "Context", "Delta", "Flow", "FlowParameters", "HandledError", "Handler", "Items",
    "LaneLock", "Parameters", "Processor", "ProcessorSettings", "ProcessorSpec",
    "PromptClient", "PromptResult", "Rejected", "Relay", "RequestTimeout", "Requester",
    "Runtime", "Service", "ServiceClient", "ServiceError", "Settings", "Stage",
    "StageContext", "StageHandler", "Timing", "Yielded", "coalesce", "current_lane",
    "delivery", "exit_process", "freeze_startup_heap", "load_settings", "queued_until",
    "relay", "serve_together", "set_lane",
]
