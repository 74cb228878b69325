"""What a host may send as a prompt: text, files and images, and the checks they pass.

Why checked here: OpenCode 1.18.34 accepts almost any prompt body and fails
later, or silently. Measured on the real server: an empty ``parts`` list is
accepted (204); an image it cannot decode makes ``prompt_async`` answer 204
and store nothing (the turn would wait for an echo that never comes); a
``file://`` URL is read from the *server's* disk; bodies of 60 MB are accepted
and inlined into the model request. So every part is built and checked before
anything is sent, and a bad field raises :class:`InvalidInputError` naming it.

What OpenCode does with each part (``docs/adapter.md``, "Prompt input"): a
``text/plain`` file becomes two synthetic text parts (a "Called the Read tool"
line and the file's content) stored before the file part, and both reach the
model; other ``text/*`` files reach the model as text; an image or PDF reaches
the model only if the model's ``modalities`` include it (otherwise the model
reads "ERROR: Cannot read ..."); other types (``application/json``) fail the
run on OpenAI-compatible providers. Files from a path are therefore read here
and sent inline (a ``data:`` URL), with a UTF-8 text file sent as ``text/plain``.
"""

from __future__ import annotations

import base64
import mimetypes
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from .._base._unicode import SURROGATE_REFUSAL, has_surrogates
from .._exceptions import InvalidInputError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PROMPT_BYTES",
    "FilePart",
    "Prompt",
    "PromptPart",
    "TextPart",
    "build_prompt",
    "file_part",
    "image_part",
    "parse_model",
    "text_part",
]

#: Largest file (decoded bytes) one part may carry. The real server accepted 60 MB,
#: but a file is inlined into the model request as text or base64: 10 MiB is already
#: far beyond any model's context, and bounds the memory both sides hold per prompt.
MAX_FILE_BYTES = 10 * 1024 * 1024
#: Largest prompt: every text part's UTF-8 bytes plus every file's bytes.
MAX_PROMPT_BYTES = 20 * 1024 * 1024

_MIME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$")

#: Image formats OpenCode's decoder and the common providers take, and their magic bytes
#: (the fake server reads the same table: adapter.testing._fake.model_input).
IMAGE_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


@dataclass(frozen=True, slots=True)
class TextPart:
    """A piece of prompt text."""

    text: str

    def to_native(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class FilePart:
    """A file sent inline: ``data`` is its content, ``mime`` its media type.

    Build one with :func:`file_part` or :func:`image_part`, which check it.
    """

    data: bytes
    mime: str
    filename: str | None = None

    @property
    def url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def to_native(self) -> dict[str, Any]:
        part: dict[str, Any] = {"type": "file", "mime": self.mime, "url": self.url}
        if self.filename is not None:
            part["filename"] = self.filename
        return part


PromptPart: TypeAlias = TextPart | FilePart
"""One part of a prompt."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A checked prompt, ready for ``prompt_async``."""

    parts: tuple[PromptPart, ...]
    system: str | None = None
    tools: Mapping[str, bool] | None = None
    variant: str | None = None

    def native_parts(self) -> list[dict[str, Any]]:
        return [part.to_native() for part in self.parts]


# -- builders --------------------------------------------------------------------------


def text_part(text: str) -> TextPart:
    """A text part; ``text`` must be a non-empty string."""
    _check_text(text, "text")
    return TextPart(text)


def file_part(
    source: str | os.PathLike[str] | bytes,
    *,
    mime: str | None = None,
    filename: str | None = None,
) -> FilePart:
    """A file from a path (read now) or from bytes (then ``mime`` is required).

    A path's ``filename`` defaults to its name. Without ``mime``, a path's type is
    guessed from its extension for images and PDFs; any other file that is valid
    UTF-8 is sent as ``text/plain`` (the one type OpenCode turns into text for
    every model), anything else as ``application/octet-stream``.
    """
    data, name = _read_source(source, "file")
    if filename is None:
        filename = name
    if mime is None:
        if isinstance(source, bytes):
            raise InvalidInputError("file.mime is required for a file given as bytes")
        mime = _guess_mime(str(source), data)
    return _checked_file(data, mime, filename, "file")


def image_part(
    source: str | os.PathLike[str] | bytes,
    *,
    mime: str | None = None,
    filename: str | None = None,
) -> FilePart:
    """An image (PNG, JPEG, GIF or WebP) from a path or from bytes.

    The content must match its type: the real server silently drops a prompt whose
    image it cannot decode. ``mime`` defaults to the type the content's magic bytes
    say. The model sees it only if its ``modalities.input`` include ``image``.
    """
    data, name = _read_source(source, "image")
    if filename is None:
        filename = name
    sniffed = _sniff_image(data)
    if mime is None:
        if sniffed is None:
            raise InvalidInputError("image: not a PNG, JPEG, GIF or WebP image")
        mime = sniffed
    part = _checked_file(data, mime, filename, "image")
    _check_image(part, "image")
    return part


# -- the whole prompt ------------------------------------------------------------------


def build_prompt(
    text_or_parts: str | Sequence[PromptPart | str],
    *,
    files: Sequence[FilePart | str | os.PathLike[str]] = (),
    system: str | None = None,
    tools: Mapping[str, bool] | None = None,
    variant: str | None = None,
) -> Prompt:
    """Check a prompt and everything sent with it; raise ``InvalidInputError`` naming
    the first bad field (nothing is sent then).

    A plain string is one text part and must not be blank (as it always was).
    ``files`` (parts, or paths read with :func:`file_part`) follow the parts.
    """
    parts: list[PromptPart] = []
    if isinstance(text_or_parts, str):
        if not text_or_parts.strip():
            raise InvalidInputError("the prompt is empty")
        _check_text(text_or_parts, "parts[0]")
        parts.append(TextPart(text_or_parts))
    elif isinstance(text_or_parts, Sequence):
        for index, item in enumerate(text_or_parts):
            parts.append(_checked_part(item, f"parts[{index}]"))
    else:
        raise InvalidInputError(
            f"parts must be a string or a list of parts, got {type(text_or_parts).__name__}"
        )
    if isinstance(files, str | bytes | os.PathLike) or not isinstance(files, Sequence):
        raise InvalidInputError("files must be a list of file parts or paths")
    for index, file in enumerate(files):
        field = f"files[{index}]"
        if isinstance(file, FilePart):
            parts.append(_checked_part(file, field))
        elif isinstance(file, str | os.PathLike):
            try:
                parts.append(file_part(file))
            except InvalidInputError as exc:
                raise InvalidInputError(f"{field}: {exc}") from None
        else:
            raise InvalidInputError(f"{field} must be a file part or a path")
    if not any(
        isinstance(p, FilePart) or (isinstance(p, TextPart) and p.text.strip()) for p in parts
    ):
        raise InvalidInputError("the prompt is empty")
    total = sum(len(p.data) if isinstance(p, FilePart) else len(p.text.encode()) for p in parts)
    if total > MAX_PROMPT_BYTES:
        raise InvalidInputError(
            f"parts: the prompt is {total} bytes, more than the limit of {MAX_PROMPT_BYTES}"
        )
    if system is not None:
        _check_text(system, "system")
    if variant is not None:
        _check_text(variant, "variant")
    checked_tools: dict[str, bool] | None = None
    if tools is not None:
        if not isinstance(tools, Mapping):
            raise InvalidInputError("tools must be a mapping of tool name to bool")
        checked_tools = {}
        for name, enabled in tools.items():
            if not isinstance(name, str) or not name:
                raise InvalidInputError(
                    f"tools: tool names must be non-empty strings, got {name!r}"
                )
            if not isinstance(enabled, bool):
                raise InvalidInputError(f"tools[{name!r}] must be a bool, got {enabled!r:.40}")
            checked_tools[name] = enabled
    return Prompt(tuple(parts), system=system, tools=checked_tools, variant=variant)


# -- checks ----------------------------------------------------------------------------


def _check_text(value: object, field: str) -> None:
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidInputError(f"{field} is empty")
    if has_surrogates(value):
        raise InvalidInputError(f"{field} {SURROGATE_REFUSAL}")


def _checked_part(item: object, field: str) -> PromptPart:
    if isinstance(item, str):
        _check_text(item, field)
        return TextPart(item)
    if isinstance(item, TextPart):
        _check_text(item.text, f"{field}.text")
        return item
    if isinstance(item, FilePart):
        checked = _checked_file(item.data, item.mime, item.filename, field)
        if checked.mime in IMAGE_SIGNATURES:
            _check_image(checked, field)
        return checked
    raise InvalidInputError(
        f"{field} must be a string, TextPart or FilePart, got {type(item).__name__}"
    )


def _checked_file(data: object, mime: object, filename: object, field: str) -> FilePart:
    if not isinstance(data, bytes):
        raise InvalidInputError(f"{field}.data must be bytes")
    if not isinstance(mime, str) or not _MIME.match(mime):
        raise InvalidInputError(f"{field}.mime must look like 'type/subtype', got {mime!r:.80}")
    if filename is not None and (not isinstance(filename, str) or not filename):
        raise InvalidInputError(f"{field}.filename must be a non-empty string")
    if not data:
        raise InvalidInputError(f"{field} is empty (0 bytes)")
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInputError(
            f"{field} is {len(data)} bytes, more than the limit of {MAX_FILE_BYTES}"
        )
    return FilePart(data, mime.lower(), filename)


def _check_image(part: FilePart, field: str) -> None:
    signatures = IMAGE_SIGNATURES.get(part.mime)
    if signatures is None:
        raise InvalidInputError(
            f"{field}.mime must be one of {', '.join(IMAGE_SIGNATURES)}, got {part.mime!r}"
        )
    if _sniff_image(part.data) != part.mime or not part.data.startswith(signatures):
        raise InvalidInputError(f"{field}: the content is not a {part.mime} image")


def _sniff_image(data: bytes) -> str | None:
    for mime, signatures in IMAGE_SIGNATURES.items():
        if data.startswith(signatures) and (mime != "image/webp" or data[8:12] == b"WEBP"):
            return mime
    return None


def _read_source(source: object, field: str) -> tuple[bytes, str | None]:
    if isinstance(source, bytes):
        return source, None
    if not isinstance(source, str | os.PathLike):
        raise InvalidInputError(f"{field} must be a path or bytes, got {type(source).__name__}")
    path = Path(source)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise InvalidInputError(f"{field}: {str(path)!r} is not a regular file")
        if size > MAX_FILE_BYTES:
            raise InvalidInputError(
                f"{field}: {str(path)!r} is {size} bytes, more than the limit of {MAX_FILE_BYTES}"
            )
        return path.read_bytes(), path.name
    except OSError as exc:
        raise InvalidInputError(
            f"{field}: cannot read {str(path)!r}: {exc.strerror or exc}"
        ) from None


def _guess_mime(path: str, data: bytes) -> str:
    guessed, _ = mimetypes.guess_type(path, strict=False)
    if guessed is not None and (guessed in IMAGE_SIGNATURES or guessed == "application/pdf"):
        return guessed
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return guessed or "application/octet-stream"
    return "text/plain"


_MODEL = re.compile(r"^([^/\s]+)/(\S+)$")


def parse_model(model: str) -> tuple[str, str]:
    """``"provider/model"`` as OpenCode's ``(providerID, modelID)``; anything else is
    :class:`InvalidInputError`."""
    match = _MODEL.match(model) if isinstance(model, str) else None
    if match is None:
        raise InvalidInputError(f"model must look like 'provider/model', got {model!r:.80}")
    return match.group(1), match.group(2)
