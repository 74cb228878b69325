"""An ACP prompt's content blocks as adapter prompt parts, and the checks of a ``cwd``.

Why its own module: every block a client sends is hostile input; what OpenCode cannot
take (audio, data that is not base64, an empty prompt) is refused here as ``invalid
params`` naming the block, before anything is sent.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)

from adapter import InvalidInputError, PromptPart, file_part, image_part, text_part

__all__ = ["ContentBlock", "check_cwd", "prompt_parts"]

ContentBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


def _error(message: str, code: int = -32603, **data: Any) -> RequestError:
    return RequestError(code, message, data or None)


def check_cwd(cwd: str) -> None:
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise RequestError(-32602, f"cwd must be an absolute path, got {cwd!r:.80}", {"cwd": cwd})


def prompt_parts(blocks: Sequence[ContentBlock]) -> list[PromptPart | str]:
    """ACP content blocks as adapter prompt parts; a block OpenCode cannot take is a
    JSON-RPC ``invalid params`` error naming it."""
    parts: list[PromptPart | str] = []
    try:
        for i, block in enumerate(blocks):
            if isinstance(block, TextContentBlock):
                if block.text:
                    parts.append(text_part(block.text))
            elif isinstance(block, ResourceContentBlock):
                parts.append(text_part(f"[{block.name}]({block.uri})"))
            elif isinstance(block, ImageContentBlock):
                parts.append(image_part(_b64(block.data, i), mime=block.mime_type))
            elif isinstance(block, EmbeddedResourceContentBlock):
                resource = block.resource
                name = resource.uri.rsplit("/", 1)[-1] or resource.uri
                if isinstance(resource, BlobResourceContents):
                    data = _b64(resource.blob, i)
                    mime = resource.mime_type or "application/octet-stream"
                else:
                    data = resource.text.encode()
                    mime = "text/plain"
                parts.append(file_part(data, mime=mime, filename=name))
            else:
                raise _error(f"prompt[{i}]: {block.type} content is not supported", -32602)
    except InvalidInputError as exc:
        raise _error(f"invalid prompt: {exc}", -32602) from exc
    if not parts:
        raise _error("the prompt is empty", -32602)
    return parts


def _b64(data: str, index: int) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _error(f"prompt[{index}]: data is not base64", -32602) from exc
