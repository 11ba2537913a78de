from .processor import Clients, Processor, ProcessorSpec, processor_main
from .requester import Requester, RequestTimeout, ServiceError
from .service import Context, HandledError, Service
from .settings import ProcessorSettings, Settings, load_settings

__all__ = [
    "Clients", "Context", "HandledError", "Processor", "ProcessorSettings",
    "ProcessorSpec", "RequestTimeout", "Requester", "Service", "ServiceError",
    "Settings", "load_settings", "processor_main",
]
