"""Validate response bodies and events against the real server's OpenAPI 3.1 spec.

OpenAPI 3.1 schemas are JSON Schema 2020-12, so the whole spec is registered as one
:mod:`referencing` resource and each response schema is reached by a JSON pointer
into it; its ``$ref``\\ s to ``#/components/schemas/...`` resolve inside the spec.
The spec is the one the real server serves at ``GET /doc`` (:func:`served_spec`);
a copy of 1.18.34's is kept in ``tests/fixtures`` for tests without a server.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from .divergences import SPEC_PATCHES, UNDOCUMENTED_RESPONSES

SPEC_PATH = Path(__file__).resolve().parent.parent / "fixtures" / "openapi-1.18.34.json"
_BASE = "urn:opencode-openapi"


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class OpenApi:
    """Response and event validation against one OpenAPI document."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        spec = copy.deepcopy(dict(spec))
        for patch in SPEC_PATCHES:
            target: Any = spec
            *parents, last = patch.pointer.split("/")
            for key in parents:
                target = target[key]
            target[last] = patch.value
        self._spec = spec
        resource = Resource.from_contents(dict(spec), default_specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(_BASE, resource)
        self._validators: dict[str, jsonschema.Draft202012Validator] = {}
        routes = []
        for template, item in spec["paths"].items():
            regex = re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$")
            literal = template.count("{")
            for method in item:
                routes.append((literal, method.upper(), template, regex))
        # Templates with fewer parameters win (``/session/status`` over ``/session/{id}``).
        self._routes = sorted(routes, key=lambda r: r[0])
        self._event_refs: dict[str, str] = {}
        for option in spec["components"]["schemas"]["Event"]["anyOf"]:
            ref = option["$ref"]
            target = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
            for event_type in target["properties"]["type"].get("enum", []):
                self._event_refs[event_type] = ref

    def _validator(self, pointer: str) -> jsonschema.Draft202012Validator:
        found = self._validators.get(pointer)
        if found is None:
            schema = {"$ref": f"{_BASE}#{pointer}"}
            found = jsonschema.Draft202012Validator(schema, registry=self._registry)
            self._validators[pointer] = found
        return found

    def operation(self, method: str, path: str) -> str | None:
        """The spec's path template for a request, or ``None``."""
        path = path.split("?", 1)[0]
        for _literal, m, template, regex in self._routes:
            if m == method.upper() and regex.match(path):
                return str(template)
        return None

    def validate_response(self, method: str, path: str, status: int, body: Any) -> list[str]:
        """Errors of a JSON response body (``[]``: valid), each ``"at <path>: <message>"``."""
        template = self.operation(method, path)
        if template is None:
            return [f"{method} {path} is not an operation of the spec"]
        responses = self._spec["paths"][template][method.lower()]["responses"]
        response = responses.get(str(status))
        if response is None:
            undocumented = UNDOCUMENTED_RESPONSES.get(status)
            if undocumented is None:
                return [f"status {status} is not documented for {method} {template}"]
            return _errors(jsonschema.Draft202012Validator(undocumented[1]), body)
        content = response.get("content", {}).get("application/json")
        if content is None:
            if body is None:
                return []
            return [f"{method} {template} {status} documents no JSON body, got one"]
        steps = ["paths", _escape(template), method.lower(), "responses", str(status)]
        pointer = "/" + "/".join([*steps, "content", _escape("application/json"), "schema"])
        return _errors(self._validator(pointer), body)

    def validate_event(self, event: Any) -> list[str]:
        """Errors of one ``/event`` envelope against the spec's schema for its type."""
        event_type = event.get("type") if isinstance(event, Mapping) else None
        ref = self._event_refs.get(str(event_type))
        if ref is None:
            return [f"event type {event_type!r} is not in the spec"]
        return _errors(self._validator(ref[1:]), event)


def _errors(validator: jsonschema.Draft202012Validator, body: Any) -> list[str]:
    out = []
    for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        out.append(f"at {where or '<root>'}: {_short(error)}")
    return out


def _short(error: jsonschema.ValidationError, prefix: str = "") -> str:
    """One line for an error; for a union, the error of the variant the value meant to be."""
    if not error.context:
        return f"{prefix}{str(error.message)[:300]}"
    branches: dict[Any, list[jsonschema.ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)

    def rank(errors: list[jsonschema.ValidationError]) -> tuple[int, int]:
        # A variant whose discriminating ``type`` (or ``status``...) matched is the one meant.
        wrong_tag = any(
            e.validator in ("enum", "const")
            and list(e.relative_path)[-1:] in (["type"], ["status"])
            for e in errors
        )
        return (int(wrong_tag), len(errors))

    best = min(branches.values(), key=rank)[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in best.relative_path)
    return _short(best, f"{prefix}variant mismatch at {where or '<root>'}: ")


@cache
def spec() -> OpenApi:
    """The real 1.18.34 server's spec, loaded once."""
    return OpenApi(json.loads(SPEC_PATH.read_text(encoding="utf-8")))


def served_spec(base_url: str, auth: tuple[str, str] | None = None) -> OpenApi:
    """The spec a running server serves at ``GET /doc``: what it must honour, so a run
    against another release (the release matrix) validates against that release's spec."""
    with httpx.Client(base_url=base_url, auth=auth, timeout=30.0, trust_env=False) as client:
        response = client.get("/doc")
        response.raise_for_status()
        return OpenApi(response.json())
