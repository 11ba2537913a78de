"""What a long-running process does with the heap it built while starting."""
import gc


def freeze_startup_heap() -> None:
    """Move everything allocated while starting (modules, schemas, templates, models)
    out of the cyclic collector's reach: it lives as long as the process.

    Two costs go with it. Every full collection walked that heap (~150k objects in
    the answering group: 0.1-0.5 s, a pause in every stream it landed on), and so
    did interpreter shutdown, several times over: ~5 s after a clean stop, past
    tg-start's grace period, so the process was killed instead of exiting 0.
    """
    gc.collect()
    gc.freeze()
