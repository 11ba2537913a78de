"""``WedgeWatch``: the broker is restarted when its log says it refused a consumer
because a dead process's consumer is still registered, and only then, and not in a
tight loop."""
from trustgraph.run import broker_watch
from trustgraph.run.broker_watch import WedgeWatch

REFUSAL = (b"[2026-11-22T08:16:41Z ERROR pulsar_lite::broker::service::server_cnx] Error "
           b"handling command: Consumer 1 already exists\n")
NOISE = (b"[2026-11-22T08:16:40Z ERROR pulsar_lite] Connection error from 127.0.0.1:49510: "
         b"Connection reset by peer (os error 104)\n")


def watch(tmp_path, before: bytes = b""):
    log = tmp_path / "broker.log"
    log.write_bytes(before)
    restarts = []
    return log, restarts, WedgeWatch(log, lambda: restarts.append(1), first_interval=5.0,
                                     max_interval=300.0)


class Clock:
    def __init__(self, monkeypatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(broker_watch.time, "monotonic", lambda: self.now)


def append(log, data: bytes) -> None:
    with open(log, "ab") as file:
        file.write(data)


def test_a_refused_consumer_restarts_the_broker(tmp_path):
    log, restarts, watcher = watch(tmp_path)
    append(log, NOISE)
    assert not watcher.check() and restarts == []
    append(log, NOISE + REFUSAL + REFUSAL)
    assert watcher.check() and restarts == [1]
    assert not watcher.check()  # nothing new since
    append(log, REFUSAL)  # the clients retrying, moments later
    assert not watcher.check() and restarts == [1]


def test_what_the_log_said_before_the_watch_began_is_not_news(tmp_path):
    log, restarts, watcher = watch(tmp_path, before=REFUSAL)
    assert not watcher.check() and restarts == []


def test_restarts_come_ever_further_apart_while_refusals_go_on(tmp_path, monkeypatch):
    clock = Clock(monkeypatch)
    log, restarts, watcher = watch(tmp_path)
    allowed = []
    for second in range(0, 200):  # a refusal every second, whatever the restarts do
        clock.now = 1000.0 + second
        append(log, REFUSAL)
        if watcher.check():
            allowed.append(second)
    # Another wedge a few seconds later is cured too; a cause restarts do not cure
    # (two replicas with the same TG_REPLICA) gets restarts 5, 10, 20, 40... s apart.
    assert allowed == [0, 5, 15, 35, 75, 155]


def test_after_a_quiet_spell_the_next_wedge_is_cured_at_once(tmp_path, monkeypatch):
    clock = Clock(monkeypatch)
    log, restarts, watcher = watch(tmp_path)
    for second in (0, 5, 15):
        clock.now = 1000.0 + second
        append(log, REFUSAL)
        assert watcher.check()
    clock.now = 1000.0 + 15 + 400  # no refusal for longer than max_interval
    append(log, REFUSAL)
    assert watcher.check()
    clock.now += 5.0  # and the interval is back to the first
    append(log, REFUSAL)
    assert watcher.check() and len(restarts) == 5


def test_a_log_that_was_cut_is_read_from_its_start(tmp_path):
    log, restarts, watcher = watch(tmp_path, before=NOISE * 10)
    log.write_bytes(REFUSAL)  # shorter than before: a new file
    assert watcher.check() and restarts == [1]
