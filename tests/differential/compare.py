"""Compare the fake's and the real server's recordings of one scenario.

Checks, in this order: driver problems, status codes, OpenAPI validity of every JSON
body and event (both targets), normalised response bodies, normalised state, the set
of event types, which directory's stream carried which session's events (scenarios
with other directories), the :func:`milestones` of each session the scenario compares
whole (``compared_runs``), and the scenario's event-order constraints (plus two
universal ones) on both streams. Every finding is a :class:`Divergence`; the registry of harmless
ones is applied before, by normalisation (:mod:`.divergences`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .divergences import is_noise
from .driver import Exchange, Recording
from .language import Scenario
from .normalise import MISSING, Normaliser, diff
from .order import Constraint, CreatedFirst, PartsAfterMessage, check, event_sessions
from .schema import OpenApi, spec


@dataclass(frozen=True)
class Divergence:
    """One difference between the fake and the real server (or a broken rule on one)."""

    scenario: str
    kind: str
    """``driver``, ``status``, ``schema``, ``body``, ``state``, ``event-types``, ``streams``,
    ``run`` (a :attr:`~.language.Scenario.compared_runs` session's milestones) or ``order``."""
    where: str
    path: str = ""
    fake: Any = None
    real: Any = None

    def __str__(self) -> str:
        head = f"[{self.kind}] {self.where}"
        if self.path:
            head += f" @ {self.path}"
        if self.kind in ("status", "body", "state", "event-types", "streams", "run"):
            head += f": fake={_show(self.fake)} real={_show(self.real)}"
        return head


def _show(value: Any, limit: int = 160) -> str:
    text = value if value == MISSING else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def known_ids(rec: Recording) -> dict[str, str]:
    """Placeholders for the ids the snapshot explains: sessions by alias, messages and
    parts by position in their session."""
    known = {sid: f"<ses:{alias}>" for alias, sid in rec.ids.items()}
    for alias, messages in rec.state.get("messages", {}).items():
        if not isinstance(messages, list):
            continue
        for i, message in enumerate(messages):
            info = message.get("info", {}) if isinstance(message, dict) else {}
            if isinstance(info.get("id"), str):
                known.setdefault(info["id"], f"<msg:{alias}.{i}>")
            for j, part in enumerate(message.get("parts", []) if isinstance(message, dict) else []):
                if isinstance(part, dict) and isinstance(part.get("id"), str):
                    known.setdefault(part["id"], f"<prt:{alias}.{i}.{j}>")
    return known


def scenario_events(rec: Recording) -> list[dict[str, Any]]:
    """The events about the scenario's sessions, plus session-less events that are not noise."""
    tree = set(rec.ids.values())
    out = []
    for event in rec.events:
        about = event_sessions(event)
        if about & tree or (not about and not is_noise(str(event.get("type")))):
            out.append(event)
    return out


def universal_constraints(rec: Recording) -> list[Constraint]:
    """Orders every scenario must keep: a session is created before anything else is
    said about it; a part follows the announcement of its message."""
    return [*(CreatedFirst(alias) for alias in rec.ids), PartsAfterMessage()]


def _schema_findings(
    name: str, rec: Recording, api: OpenApi, events: Sequence[dict[str, Any]]
) -> Iterable[Divergence]:
    for ex in rec.exchanges:
        if ex.body is None:
            continue
        if not ex.json:
            if api.operation(ex.method, ex.path) is not None:
                yield Divergence(
                    name,
                    "schema",
                    f"{rec.target}: {ex.label} → {ex.status} answered non-JSON "
                    f"{_show(ex.body, 60)}",
                )
            continue
        for error in api.validate_response(ex.method, ex.path, ex.status, ex.body):
            yield Divergence(name, "schema", f"{rec.target}: {ex.label} → {ex.status} {error}")
    seen: set[tuple[str, str]] = set()
    for event in events:
        for error in api.validate_event(event):
            key = (str(event.get("type")), error)
            if key not in seen:
                seen.add(key)
                yield Divergence(name, "schema", f"{rec.target}: event {key[0]} {error}")


def compare(
    scenario: Scenario, fake: Recording, real: Recording, api: OpenApi | None = None
) -> list[Divergence]:
    """Every divergence between the two recordings of ``scenario``; bodies and events are
    validated against ``api`` (default: the 1.18.34 spec in ``tests/fixtures``)."""
    name = scenario.name
    api = api or spec()
    out: list[Divergence] = []
    for rec in (fake, real):
        out.extend(Divergence(name, "driver", f"{rec.target}: {p}") for p in rec.problems)

    norm_fake = Normaliser(known_ids(fake), directory_placeholders(fake))
    norm_real = Normaliser(known_ids(real), directory_placeholders(real))
    # State first, so ids are numbered in the same (structural) order on both sides.
    state_fake, state_real = norm_fake(fake.state), norm_real(real.state)

    fake_ex = _keyed(fake.exchanges)
    real_ex = _keyed(real.exchanges)
    for key in list(real_ex) + [k for k in fake_ex if k not in real_ex]:
        f, r = fake_ex.get(key), real_ex.get(key)
        where = f"{key[1]} (#{key[0]})" if key[2] == "scenario" else key[1]
        if f is None or r is None:
            out.append(Divergence(name, "status", where, "", _status(f), _status(r)))
            continue
        if f.status != r.status:
            out.append(Divergence(name, "status", where, "", f.status, r.status))
        if key[2] == "scenario":
            body_fake = norm_fake(scoped(f.body, set(fake.ids.values())))
            body_real = norm_real(scoped(r.body, set(real.ids.values())))
            if _lists_sessions(f) and _lists_sessions(r):
                # Which of two sessions a turn touched last is timing (their
                # ``time.updated`` can tie to the millisecond): compared as a set, and
                # each target's order is checked against the measured rule instead.
                body_fake, body_real = as_set(body_fake), as_set(body_real)
                for rec, ex in ((fake, f), (real, r)):
                    if not newest_first(scoped(ex.body, set(rec.ids.values()))):
                        out.append(
                            Divergence(name, "order", f"{rec.target}: {where}", "not newest first")
                        )
            for d in diff(body_fake, body_real):
                out.append(Divergence(name, "body", where, d.path, d.fake, d.real))

    events_fake, events_real = scenario_events(fake), scenario_events(real)
    for rec, events in ((fake, events_fake), (real, events_real)):
        out.extend(_schema_findings(name, rec, api, events))

    for d in diff(state_fake, state_real):
        out.append(Divergence(name, "state", "state", d.path, d.fake, d.real))

    types_fake = {str(e.get("type")) for e in events_fake} - {"server.connected"}
    types_real = {str(e.get("type")) for e in events_real} - {"server.connected"}
    types_fake = {t for t in types_fake if not is_noise(t)}
    types_real = {t for t in types_real if not is_noise(t)}
    for t in sorted(types_real - types_fake):
        out.append(Divergence(name, "event-types", "event types", t, MISSING, "emitted"))
    for t in sorted(types_fake - types_real):
        out.append(Divergence(name, "event-types", "event types", t, "emitted", MISSING))

    if len(fake.streams) > 1 or len(real.streams) > 1:
        for d in diff(stream_contents(fake), stream_contents(real)):
            out.append(Divergence(name, "streams", "event streams", d.path, d.fake, d.real))

    for alias in scenario.compared_runs:
        found = diff(milestones(fake, alias), milestones(real, alias))
        out.extend(
            Divergence(name, "run", f"run of {alias}", d.path, d.fake, d.real) for d in found
        )

    for rec, events in ((fake, events_fake), (real, events_real)):
        constraints = [*scenario.constraints, *universal_constraints(rec)]
        for violation in check(constraints, events, rec.ids):
            out.append(Divergence(name, "order", f"{rec.target}: {violation}"))
    return out


UNTOLD = frozenset({"session.updated", "session.diff", "message.part.delta"})
"""Events left out of :func:`milestones`: bookkeeping whose number and place are timing on
the real server (``session.updated`` and ``session.diff`` land between any two milestones;
deltas follow the model's chunking)."""


def milestones(rec: Recording, alias: str) -> list[str]:
    """The events about session ``alias``, each told by what a client reads from it (a
    message's role and how it ended, a part's type and a tool's status, a status's type),
    with what is timing on the real server left out:

    * a message's first ``message.updated`` is told as its announcement (its role), whatever
      state it carries: the real server writes the message as it is when the stream sends
      the update, so under load an answer's first update can already say it finished,
      before its parts (1.17.19: 1 of 23 runs of ``another_client_prompts_a_fresh_session``
      with the machine loaded; 1.18.3 too, in CI);
    * an update that repeats the state already told of its message is dropped (the real
      server sends a finished message's update twice), and so is a message's announcement
      right before its own finished update;
    * other consecutive repeats collapsed (the real server says ``busy`` twice);
    * :data:`UNTOLD` events left out."""
    sid = rec.ids.get(alias)
    out: list[str] = []
    told: dict[str, str] = {}  # message id -> what was last told of it
    last_told: str | None = None  # the message whose update is out[-1], if it is one
    for event in rec.events:
        kind = str(event.get("type"))
        if sid not in event_sessions(event) or kind in UNTOLD or is_noise(kind):
            continue
        props = event.get("properties", {})
        label = _milestone(kind, props)
        if kind == "message.updated":
            info = props.get("info", {})
            message = str(info.get("id"))
            if message not in told:
                label = f"{kind} {info.get('role')}"
            elif told[message] == label:
                continue
            told[message] = label
            if last_told == message and label.startswith(out[-1] + " "):
                out[-1] = label  # the announcement right before says nothing more
                continue
            last_told = message
        elif out and out[-1] == label:
            continue
        else:
            last_told = None
        out.append(label)
    return out


def _milestone(kind: str, props: Any) -> str:
    if kind == "message.updated":
        info = props.get("info", {})
        label = f"{kind} {info.get('role')}"
        if info.get("finish"):
            label += f" finish={info['finish']}"
        if info.get("time", {}).get("completed"):
            label += " completed"
        if info.get("error"):
            label += f" error={info['error'].get('name')}"
        return label
    if kind == "message.part.updated":
        part = props.get("part", {})
        label = f"{kind} {part.get('type')}"
        if part.get("type") == "tool":
            label += f" {part.get('tool')} {part.get('state', {}).get('status')}"
        elif part.get("type") in ("text", "reasoning") and part.get("time", {}).get("end"):
            label += " ended"
        return label
    if kind == "session.status":
        return f"{kind} {props.get('status', {}).get('type')}"
    if kind == "session.error":
        return f"{kind} {props.get('error', {}).get('name')}"
    return kind


def directory_placeholders(rec: Recording) -> dict[str, str]:
    """The target's own directory becomes ``<dir>``, another one ``<dir:NAME>``."""
    named = {path: f"<dir:{name}>" for name, path in rec.directories.items()}
    return {rec.directory: "<dir>", **named}


def stream_contents(rec: Recording) -> dict[str, dict[str, list[str]]]:
    """Per directory's stream: the scenario's sessions it carried events of (by alias),
    each with the (non-noise) types of those events."""
    alias_of = {sid: alias for alias, sid in rec.ids.items()}
    out: dict[str, dict[str, list[str]]] = {}
    for stream, events in rec.streams.items():
        seen: dict[str, set[str]] = {}
        for event in events:
            kind = str(event.get("type"))
            if is_noise(kind):
                continue
            for sid in event_sessions(event):
                if sid in alias_of:
                    seen.setdefault(alias_of[sid], set()).add(kind)
        out[stream] = {alias: sorted(kinds) for alias, kinds in sorted(seen.items())}
    return out


def scoped(body: Any, tree: set[str]) -> Any:
    """A session listing reduced to the scenario's sessions (see ``SHARED_SERVER_SCOPE``)."""
    if isinstance(body, list) and body and all(_is_session(item) for item in body):
        return [item for item in body if item["id"] in tree]
    return body


def _lists_sessions(ex: Exchange) -> bool:
    """``GET /session`` (any query): ordered by last activity, which can tie. Other
    listings (``/children``: creation order) are compared in order."""
    return ex.path.split("?")[0] == "/session" and is_listing(ex.body)


def is_listing(body: Any) -> bool:
    """Whether ``body`` is a (non-empty) list of sessions."""
    return isinstance(body, list) and bool(body) and all(_is_session(item) for item in body)


def as_set(listing: list[Any]) -> list[Any]:
    """A normalised session listing in a fixed order (by its placeholder id)."""
    return sorted(listing, key=lambda item: str(item["id"]))


def newest_first(listing: Any) -> bool:
    """The measured listing rule: newest ``time.updated`` first (ties in any order)."""
    if not is_listing(listing):
        return True
    stamps = [item.get("time", {}).get("updated", 0) for item in listing]
    return all(a >= b for a, b in itertools.pairwise(stamps))


def _is_session(item: Any) -> bool:
    return isinstance(item, dict) and str(item.get("id", "")).startswith("ses")


def _keyed(exchanges: Sequence[Exchange]) -> dict[tuple[int, str, str], Exchange]:
    """Scenario requests by position, state requests by label (their number can differ)."""
    out: dict[tuple[int, str, str], Exchange] = {}
    position = 0
    for ex in exchanges:
        if ex.phase == "scenario":
            out[(position, ex.label, "scenario")] = ex
            position += 1
        else:
            out[(-1, ex.label, "state")] = ex
    return out


def _status(ex: Exchange | None) -> Any:
    return MISSING if ex is None else ex.status


def report(results: Sequence[tuple[Scenario, Sequence[Divergence], float]]) -> str:
    """A human-readable list of every divergence, per scenario."""
    lines = []
    total = 0
    for scenario, divergences, seconds in results:
        total += len(divergences)
        mark = "ok" if not divergences else f"{len(divergences)} divergence(s)"
        lines.append(f"== {scenario.name}: {mark} ({seconds:.1f} s)")
        lines.extend(f"   {d}" for d in divergences)
    lines.append(f"== {total} divergence(s) in {len(results)} scenario(s)")
    return "\n".join(lines)
