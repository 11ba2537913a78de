"""The local model's own process: llama.cpp's HTTP server (through ``xllamacpp``)
on a loopback port, serving one GGUF. The provider (``provider.py``) starts it,
reads its address from the one JSON line it prints when the model is loaded, and
speaks the OpenAI chat API to it.

It lives while its standard input is open: the provider holds the other end, so
however the provider's process ends (even SIGKILL) this one follows. SIGINT is
ignored: a Ctrl-C reaches the whole process group, and the provider stops this
process itself, after its own requests.

    python -m trustgraph.model.text_completion.local.server '{"model": ..., ...}'
"""
import json
import os
import signal
import sys

API_KEY_VARIABLE = "TG_LOCAL_SERVER_KEY"  # not on the command line, where ps shows it


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    config = json.loads(argv[0])
    import xllamacpp  # here, not at the top: the provider's process never loads it

    params = xllamacpp.CommonParams()
    params.model.path = config["model"]
    params.model_alias = {config["name"]}
    params.n_parallel = config["parallel"]
    params.n_ctx = config["context"] * config["parallel"]  # each sequence has its own
    params.cpuparams.n_threads = config["threads"]
    params.cpuparams_batch.n_threads = config["threads"]
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port, reported on stdout
    params.api_keys = [os.environ.pop(API_KEY_VARIABLE, "")]
    params.ui = False
    params.endpoint_metrics = True  # GET /metrics: llama.cpp's own Prometheus counters
    params.verbosity = 1  # warnings and errors; no line per request
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as error:  # llama.cpp logged the reason to stderr
        print(f"llama.cpp could not load {config['model']}: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"url": server.listening_address}), flush=True)
    sys.stdin.read()  # until the provider closes it or its process is gone
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
