"""How the fake stores a prompt's parts, and what of them would reach the model.

Measured on OpenCode 1.18.34 (``POST /session/{id}/prompt_async``; the model
request seen by a scripted OpenAI-compatible model; ``docs/adapter.md``,
"Prompt input"):

* A text part is stored as sent and reaches the model as a text item.
* A ``text/plain`` file is stored as two **synthetic** text parts followed by the
  file part itself: ``Called the Read tool with the following input: {"filePath":...}``
  (the ``filename``, or ``{}`` without one) and the content. For a ``data:`` URL the
  content is the decoded text; for a ``file://`` URL it is the read tool's output
  (``<path>…</path>``, numbered lines) and ``filePath`` is the absolute path; a
  missing file gives ``Read tool failed to read … File not found: …`` and no file
  part. Both synthetic texts reach the model; the file part does not.
* Any other ``text/*`` file (and a malformed type with a ``data:`` URL) is stored
  as a file part only; its decoded content reaches the model as text.
* An image or PDF is stored as a file part; it reaches the model as an
  ``image_url`` item only if the model's input modalities include it, otherwise
  the model reads ``ERROR: Cannot read "<filename>" (this model does not support
  image input). Inform the user.`` An image the server cannot decode makes the
  prompt vanish: ``204``, nothing stored, no run.
* Any other type (``application/json``) is stored, and the run fails at once with
  ``UnknownError`` ``'file part media type …' functionality not supported.``
* ``system`` is stored on the user message and appended to the system prompt of
  this prompt's model calls only; ``tools`` is stored and a ``false`` tool is left
  out of the model's tool list; ``variant`` is stored in the user message's
  ``model`` and on the assistant message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..._base._unicode import well_formed
from ..._turns._prompt_input import IMAGE_SIGNATURES

JSON = dict[str, Any]

__all__ = ["ModelInput", "PromptParts", "convert_parts"]


@dataclass(frozen=True, slots=True)
class ModelInput:
    """What the real server would put in the model request for one prompt.

    ``content`` holds the user message's content items as an OpenAI-compatible
    provider receives them (``{"type": "text", "text"}`` or ``{"type": "image_url",
    "image_url": {"url"}}``); ``system`` is appended to the system prompt; a tool
    mapped to ``False`` in ``tools`` is not offered to the model.
    """

    session_id: str
    message_id: str
    content: tuple[JSON, ...]
    system: str | None = None
    tools: Mapping[str, bool] | None = None
    variant: str | None = None

    @property
    def text(self) -> str:
        """The text items, one per line."""
        return "\n".join(str(c["text"]) for c in self.content if c.get("type") == "text")

    def offers(self, tool: str) -> bool:
        """Whether ``tool`` is in the model's tool list (unless the fake knows no such tool)."""
        return not (self.tools is not None and self.tools.get(tool) is False)


@dataclass(slots=True)
class PromptParts:
    """A prompt's parts as the server stores them (without ids), and the model content."""

    stored: list[JSON] = field(default_factory=list)
    content: list[JSON] = field(default_factory=list)
    #: The run fails at once with this ``UnknownError`` message (an unsupported type).
    failure: str | None = None
    #: The prompt vanishes (an image that does not decode).
    dropped: bool = False


def convert_parts(raw_parts: Sequence[JSON], *, modalities: frozenset[str]) -> PromptParts:
    """Store and convert a prompt's parts as the real server does (module docstring)."""
    result = PromptParts()
    for raw in raw_parts:
        if raw.get("type") == "text":
            part: JSON = {k: raw[k] for k in ("type", "text", "synthetic", "ignored") if k in raw}
            result.stored.append(part)
            result.content.append({"type": "text", "text": raw["text"]})
        elif raw.get("type") == "file":
            _convert_file(raw, modalities, result)
        else:
            result.stored.append({k: v for k, v in raw.items() if k != "id"})
    return result


def _convert_file(raw: JSON, modalities: frozenset[str], result: PromptParts) -> None:
    mime = str(raw.get("mime", ""))
    url = str(raw.get("url", ""))
    filename = raw.get("filename")
    file_part: JSON = {"type": "file", "mime": mime}
    if filename is not None:
        file_part["filename"] = filename
    file_part["url"] = url
    data = _data_url_bytes(url)
    if mime == "text/plain":
        if url.startswith("file://"):
            path = unquote(urlparse(url).path)
            called = _called_read({"filePath": path})
            try:
                text = Path(path).read_text()
            except OSError:
                failed = (
                    f"Read tool failed to read {path} with the following error: "
                    f"File not found: {path}"
                )
                _synthetic(result, called, failed)
                return
            _synthetic(result, called, _read_output(path, text))
        else:
            called = _called_read({"filePath": filename} if filename is not None else {})
            _synthetic(result, called, (data or b"").decode("utf-8", "replace"))
        result.stored.append(file_part)
        return
    kind = "image" if mime.startswith("image/") else "pdf" if mime == "application/pdf" else None
    if kind == "image" and data is not None:
        signatures = IMAGE_SIGNATURES.get(mime)
        if signatures is not None and not data.startswith(signatures):
            result.dropped = True
    result.stored.append(file_part)
    if kind is not None:
        if kind in modalities:
            result.content.append({"type": "image_url", "image_url": {"url": url}})
        else:
            result.content.append(
                {
                    "type": "text",
                    "text": f'ERROR: Cannot read "{filename or ""}" (this model does not '
                    f"support {kind} input). Inform the user.",
                }
            )
    elif (mime.startswith("text/") or "/" not in mime) and data is not None:
        result.content.append({"type": "text", "text": data.decode("utf-8", "replace")})
    elif result.failure is None:
        result.failure = f"'file part media type {mime}' functionality not supported."


def _synthetic(result: PromptParts, *texts: str) -> None:
    for text in texts:
        result.stored.append({"type": "text", "text": text, "synthetic": True})
        result.content.append({"type": "text", "text": text})


def _called_read(arguments: JSON) -> str:
    encoded = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    return f"Called the Read tool with the following input: {encoded}"


def _read_output(path: str, text: str) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    numbered = "\n".join(f"{n}: {line}" for n, line in enumerate(lines, 1))
    return (
        f"<path>{path}</path>\n<type>file</type>\n<content>\n{numbered}\n\n"
        f"(End of file - total {len(lines)} lines)\n</content>"
    )


def _data_url_bytes(url: str) -> bytes | None:
    if not url.startswith("data:") or "," not in url:
        return None
    header, payload = url[5:].split(",", 1)
    if header.endswith(";base64"):
        try:
            return base64.b64decode(payload, validate=True)
        except ValueError:
            return None
    # A lone surrogate (a JSON escape in the URL) is U+FFFD in Node's UTF-8, never a crash.
    return well_formed(unquote(payload)).encode()
