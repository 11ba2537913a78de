"""Where Chromium's CPU goes while the stack retrieves for a question asked in the
workbench page, from Chromium's own trace.

Same setup as ``bench.workbench`` (the default stack with one small document, the
scripted LLM, headless Chromium). The page asks ``--rounds`` document questions
(after three unrecorded ones) while Chromium records a trace; for each, the CPU
time (``tdur`` of every top-level task) each Chromium thread spent from the page's
``tg:ask`` mark to its ``tg:sources`` mark, which is when the stack embeds the
question and searches, on the same cores when page and stack share a machine.
Printed: the median over rounds per thread, and the raster tasks run.

The window starts a few ms before ``tg:ask`` so the task that asks is counted
whole; that task also holds WebDriver's own script (``bench.workbench``'s
``SUBMIT``), as every round of that bench does.
"""
import argparse
import json
import time
from collections import Counter

from bench.stats import median
from bench.streaming import llm_server
from bench.workbench import COLLECTION, LLM_FIRST, QUESTION, SUBMIT, TOKEN, USER, load_corpus
from tests.support.browser import chromium, missing
from tests.support.stack import Stack
from tests.support.workbench import WorkbenchPage

CATEGORIES = ("toplevel,blink.user_timing,devtools.timeline,"
              "disabled-by-default-devtools.timeline,v8,blink,cc,viz")
LEAD = 4000  # µs before tg:ask: the task that asks began there


def trace_events(driver) -> list[dict]:
    """The trace events recorded since the last call."""
    events = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Tracing.dataCollected":
            events.append(message["params"])
    return events


def ask_and_record(page: WorkbenchPage, rounds: int) -> list[dict]:
    events = []
    for _ in range(rounds):
        page.js(SUBMIT, QUESTION, "document")
        time.sleep(1.0)  # no WebDriver call while the answer streams
        page.finished()
        events += trace_events(page.driver)
    return events


def cpu_while_retrieving(events: list[dict]) -> tuple[dict[str, list[float]], list[int]]:
    """Per thread ("process/thread"), ms of CPU from each tg:ask to its tg:sources;
    and the raster tasks run in each of those windows."""
    names: dict[tuple, str] = {}
    processes: dict[int, str] = {}
    for e in events:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            names[e["pid"], e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
    marks = sorted((e["ts"], e["name"]) for e in events
                   if e["name"] in ("tg:ask", "tg:sources") and e.get("ph") in ("R", "I", "n"))
    tasks = [e for e in events if e.get("ph") == "X" and e.get("cat") == "toplevel"
             and e["name"] == "ThreadControllerImpl::RunTask"]
    rasters = [e["ts"] for e in events if e.get("ph") == "X" and e["name"] == "RasterTask"]
    counted: list[Counter[str]] = []
    raster_counts = []
    windows = [(t, next(s for s, m in marks if m == "tg:sources" and s > t))
               for t, name in marks if name == "tg:ask"
               and any(m == "tg:sources" and s > t for s, m in marks)]
    for ask, sources in windows:
        cpu: Counter[str] = Counter()
        for e in tasks:
            if ask - LEAD <= e["ts"] < sources:
                thread = (f"{processes.get(e['pid'], e['pid'])}/"
                          f"{names.get((e['pid'], e['tid']), e['tid'])}")
                cpu[thread] += e.get("tdur", 0) / 1000
        counted.append(cpu)
        raster_counts.append(sum(ask <= t < sources for t in rasters))
    threads = {thread for cpu in counted for thread in cpu}
    per_thread = {thread: [cpu.get(thread, 0.0) for cpu in counted] for thread in threads}
    per_thread["all threads"] = [sum(cpu.values()) for cpu in counted]
    return per_thread, raster_counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if missing():
        raise SystemExit(f"bench.workbench_trace: {missing()}")
    with llm_server(tokens=20, first=LLM_FIRST, delay=0.01) as llm, \
            Stack(env={"OPENAI_BASE_URL": f"{llm}/v1", "OPENAI_API_KEY": "bench"},
                  token=TOKEN, startup_timeout=180) as stack:
        load_corpus(stack)
        with chromium(trace=CATEGORIES) as driver:
            page = WorkbenchPage(driver, stack.gateway_url)
            page.open(TOKEN)
            page.set_scope(USER, COLLECTION)
            ask_and_record(page, 3)  # warm-up, not counted
            trace_events(driver)
            per_thread, rasters = cpu_while_retrieving(ask_and_record(page, args.rounds))
    rounds = len(rasters)
    print(f"bench.workbench_trace: Chromium CPU from tg:ask to tg:sources (document-rag), "
          f"median of {rounds} rounds, ms")
    for thread, values in sorted(per_thread.items(), key=lambda kv: -median(kv[1])):
        if median(values) >= 0.1:
            print(f"  {median(values):6.2f}  {thread}")
    print(f"  raster tasks per round: median {median(rasters):g}")


if __name__ == "__main__":
    main()
