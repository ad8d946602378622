"""moto_server (moto 5.2) for the local stack, with DynamoDB transactions made atomic, SQS long
polls that wait instead of spinning, and EventBridge archive replays that replay what AWS does.

Run as `python3 moto_launcher.py <moto_server arguments>`; lib/dev/local/moto.ts starts it.
`python3 moto_launcher.py --check` exits 0 when it could (what it imports is installed).

moto applies a TransactWriteItems action by action (each one adding its stream record) and, when
one fails, puts back deep copies of the whole tables it took when the transaction began. Three
things real DynamoDB never does follow from that:
- the copies carry a new stream shard object, and every shard iterator opened before keeps reading
  the old one, which never grows again: after one cancelled transaction the relay hears nothing;
- the old shard keeps the stream records of the actions applied before the failure, so a reader
  holding an iterator sees writes of a transaction that was cancelled;
- a write another request thread made meanwhile disappears with the restore.
And the copies cost time in proportion to the data in the tables, on every transaction.

Here every DynamoDB item and stream operation runs under one lock, moto's table copies are the
tables themselves (so its restore changes nothing), and a failed transaction is undone in place:
each item it touched gets its previous version back and the stream records it added are removed,
on the same shard objects. A cancelled transaction writes nothing and streams nothing. Failures
are raised exactly as moto raises them (CancellationReasons are mapped back by index).
"""

import copy
import datetime
import functools
import logging
import sys
import threading
import time
import types
import uuid

import jsonpath_ng.ext as jsonpath_ext
import moto.backends as moto_backends
import moto.dynamodb.models as dynamodb_models
import moto.events.models as events_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodbstreams.models import DynamoDBStreamsBackend
from moto.core.utils import unix_time
from moto.sqs.models import SQSBackend

_lock = threading.RLock()


def _serialized(method):
    def run(self, *args, **kwargs):
        with _lock:
            return method(self, *args, **kwargs)

    return run


# Reads too: a reader must not see an item or a stream record of a transaction still under way
# (it may yet be undone). moto's BatchWriteItem/BatchGetItem/TransactGetItems go through these.
for _name in ("put_item", "update_item", "delete_item", "get_item", "query", "scan"):
    setattr(DynamoDBBackend, _name, _serialized(getattr(DynamoDBBackend, _name)))
for _name in ("get_shard_iterator", "get_records"):
    setattr(DynamoDBStreamsBackend, _name, _serialized(getattr(DynamoDBStreamsBackend, _name)))


def _deepcopy_but_tables(value, memo=None):
    return value if isinstance(value, Table) else copy.deepcopy(value, memo)


# moto.dynamodb.models uses `copy` only for these deep copies: of the tables a transaction touches
# (its whole-table snapshot, skipped here) and of the item an UpdateItem changes (kept).
dynamodb_models.copy = types.SimpleNamespace(copy=copy.copy, deepcopy=_deepcopy_but_tables)


def _previous_versions(backend, transact_items):
    """Each item the transaction may write, with a copy of its current version (None: absent),
    and the length of each touched table's stream."""
    items, streams = [], {}
    for action in transact_items:
        for kind, op in action.items():
            table = backend.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            if table.stream_shard is not None:
                streams.setdefault(table.stream_shard, len(table.stream_shard.items))
            key = op.get("Item" if kind == "Put" else "Key")
            try:
                hash_key = DynamoType(key[table.hash_key_attr])
                range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
                previous = table.get_item(hash_key, range_key)
            except Exception:
                continue  # no usable key: moto refuses the action before writing anything
            items.append((table, hash_key, range_key, copy.deepcopy(previous)))
    return items, streams


def _undo(items, streams):
    for table, hash_key, range_key, previous in reversed(items):
        if range_key is None:
            holder, name = table.items, hash_key
        else:
            holder, name = table.items[hash_key], range_key
        if previous is None:
            holder.pop(name, None)
        else:
            holder[name] = previous
        if range_key is not None and not holder:
            del table.items[hash_key]
    for shard, length in streams.items():
        del shard.items[length:]


_transact_write_items = DynamoDBBackend.transact_write_items


def _atomic_transact_write_items(self, transact_items):
    with _lock:
        items, streams = _previous_versions(self, transact_items)
        try:
            return _transact_write_items(self, transact_items)
        except BaseException:
            _undo(items, streams)
            raise


DynamoDBBackend.transact_write_items = _atomic_transact_write_items


# SQS long polls. moto's receive loop decides once, when the call begins, which FIFO groups are in
# flight, and waits with `wait_for(lambda: self.messages)`, which returns at once while the queue
# holds any visible message, also one it cannot hand out. So a long poll on a queue with a group in
# flight spins at full CPU for its whole wait time, and never gets that group's next message even
# after the message before it is deleted (SQS hands it out then). Here a long poll is a series of
# immediate receives, each looking at the queue afresh, with a wait between them until a message is
# added (moto notifies then) or a short re-check interval passes (a visibility timeout that ran
# out, a group whose message was deleted).
_SQS_RECHECK_SECONDS = 0.05
_receive_message = SQSBackend.receive_message


def _long_poll(self, queue_name, count, wait_seconds_timeout, visibility_timeout, *args, **kwargs):
    deadline = time.monotonic() + (wait_seconds_timeout or 0)
    while True:
        result = _receive_message(self, queue_name, count, 0, visibility_timeout, *args, **kwargs)
        remaining = deadline - time.monotonic()
        if result or remaining <= 0:
            return result
        queue = self.get_queue(queue_name)
        with queue._messages_lock:
            queue._messages_lock.wait(timeout=min(remaining, _SQS_RECHECK_SECONDS))


SQSBackend.receive_message = _long_poll


# moto keeps every shard iterator it ever handed out (each GetRecords makes a new one), so a stream
# poller grows the emulator's memory for as long as it runs. Keep the newest ones only: far more
# than the local runtime's pollers hold at once.
_MAX_SHARD_ITERATORS = 10_000
_get_records = DynamoDBStreamsBackend.get_records


def _get_records_forgetting(self, iterator_arn, limit):
    result = _get_records(self, iterator_arn, limit)
    iterators = self.shard_iterators
    while len(iterators) > _MAX_SHARD_ITERATORS:
        del iterators[next(iter(iterators))]
    return result


DynamoDBStreamsBackend.get_records = _serialized(_get_records_forgetting)


# EventBridge archive replays. moto's Replay.replay_events sends every archived event to every rule
# of the destination bus: it ignores the replay's window (EventStartTime, EventEndTime) and its
# Destination.FilterArns, hands every target the archived event as stored (input transformers
# skipped, moto's internal `ingestion-time` left in the body), and its DescribeReplay has no
# EventLastReplayedTime. AWS replays only the archived events whose time (the event's `time`, from
# PutEvents' Time) falls in [EventStartTime, EventEndTime), only to the rules in FilterArns (every
# rule of the bus when there is none; an archive's own rule never matches a replayed event), each
# matched against the rule's pattern, with a new id and `replay-name` set, and reports the time of
# the last event replayed. Here a replay does that. It still runs at once, inside StartReplay
# (COMPLETED when the call returns), where AWS goes through STARTING and RUNNING in one-minute
# steps of event time.
_ARCHIVE_RULE_MANAGER = "prod.vhs.events.aws.internal"


def _epoch(value):
    """Seconds since the epoch of a time as moto keeps it: a number, or an ISO 8601 string."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _send_replayed(rule, event):
    """One rule's targets, as for a live event: raw event, or through the target's transformer."""
    plain = [t for t in rule.targets if "InputTransformer" not in t]
    shaped = [t for t in rule.targets if "InputTransformer" in t]
    as_sent = {k: v for k, v in event.items() if k != "ingestion-time"}
    for targets, message, transform in ((plain, as_sent, False), (shaped, event, True)):
        if targets:
            view = copy.copy(rule)
            view.targets = targets
            view.send_to_targets(dict(message), transform_input=transform)


def _replay_events(self, archive):
    backend = events_models.events_backends[self.account_id][self.region]
    bus = backend.describe_event_bus(self.destination["Arn"].split("/")[-1])
    start, end = _epoch(self.event_start_time), _epoch(self.event_end_time)
    filters = set(self.destination.get("FilterArns") or [])
    rules = [
        rule
        for rule in bus.rules.values()
        if (rule.arn in filters if filters else rule.managed_by != _ARCHIVE_RULE_MANAGER)
    ]
    last = None
    for event in sorted(archive.events, key=lambda e: _epoch(e["time"])):
        at = _epoch(event["time"])
        if not start <= at < end:
            continue
        replayed = dict(event, **{"id": str(uuid.uuid4()), "replay-name": self.name})
        for rule in rules:
            _send_replayed(rule, replayed)
        last = at
    self.event_last_replayed_time = last
    self.state = events_models.ReplayState.COMPLETED
    self.end_time = unix_time()


_describe_replay = events_models.Replay.describe


def _describe_replay_with_progress(self):
    result = _describe_replay(self)
    last = getattr(self, "event_last_replayed_time", None)
    if last is not None:
        result["EventLastReplayedTime"] = last
    return result


events_models.Replay.replay_events = _replay_events
events_models.Replay.describe = _describe_replay_with_progress


# Per-request costs of moto_server that grow a local stack's latency on every hop:
# - the host of every request is checked against a directory listing of moto's modules, read from
#   disk each time: read it once;
# - every EventBridge rule target builds its input with jsonpath expressions, and jsonpath_ng
#   builds its LALR parser (tables included) for every expression it parses: ~15 ms a target, so a
#   PutEvents that fans out to a few groups took ~300 ms. Parsed expressions are kept instead
#   (they are immutable);
# - werkzeug logs a line per request to stderr: only errors are logged.
_moto_modules = tuple(moto_backends.list_of_moto_modules())
moto_backends.list_of_moto_modules = lambda: _moto_modules
jsonpath_ext.parse = functools.lru_cache(maxsize=1024)(jsonpath_ext.parse)
logging.getLogger("werkzeug").setLevel(logging.ERROR)


if __name__ == "__main__":
    from moto.server import main

    # `--check`: everything above imported, so moto_server can start here (lib/dev/local/moto.ts).
    if sys.argv[1:] == ["--check"]:
        sys.exit(0)
    main(sys.argv[1:])
