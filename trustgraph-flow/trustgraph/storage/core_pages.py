"""What the store owners' knowledge-core services share: pages that fit one message."""
from collections.abc import Awaitable, Callable

from trustgraph.base.stage import MAX_RECORD_BYTES
from trustgraph.schema import encode
from trustgraph.schema.cores import CoreResponse

from .owner import fits_one_message


async def fitting_page(page: Callable[[int], Awaitable[CoreResponse]],
                       limit: int) -> CoreResponse:
    """``page(limit)``, with half the records again while it is too big for one broker
    message (long texts); one record too big alone is the error saying so."""
    while True:
        response = await page(limit)
        if limit == 1 or len(encode(response)) <= MAX_RECORD_BYTES:
            fits_one_message(response, response.count or 1, "core export")
            return response
        limit //= 2
