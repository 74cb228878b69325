"""Rich prompt input: the part builders, the checks before sending, and what the fake
stores and would hand its model (as measured on OpenCode 1.18.34, ``docs/adapter.md``,
"Prompt input")."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from adapter import (
    MAX_FILE_BYTES,
    MAX_PROMPT_BYTES,
    FilePart,
    InvalidInputError,
    OpenCodeAdapter,
    TextPart,
    file_part,
    image_part,
    text_part,
)
from adapter.testing.fake import FakeOpenCodeServer
from tests.adapter_support import Recorder

T = "thread-1"
#: A value of the wrong type, passed on purpose where text is expected.
NOT_TEXT: Any = 3


def png_bytes() -> bytes:
    """A valid 2x2 PNG."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def prompts_sent(fake: FakeOpenCodeServer) -> list[Any]:
    return [r for r in fake.requests if r.path.endswith(("/prompt_async", "/message"))]


def user_message(fake: FakeOpenCodeServer, session_id: str) -> Any:
    return [m for m in fake.sessions[session_id].messages if m.role == "user"][-1]


def visible(part: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in part.items() if k not in ("id", "messageID", "sessionID")}


# -- builders --------------------------------------------------------------------------


def test_builders_make_the_parts_opencode_takes(tmp_path: Path) -> None:
    assert text_part("hi").to_native() == {"type": "text", "text": "hi"}
    notes = tmp_path / "notes.py"
    notes.write_text("print('x')\n")
    part = file_part(notes)
    # A UTF-8 file goes as text/plain: the one type OpenCode turns into text for any model.
    assert (part.mime, part.filename, part.data) == ("text/plain", "notes.py", b"print('x')\n")
    assert part.to_native() == {
        "type": "file",
        "mime": "text/plain",
        "url": "data:text/plain;base64," + base64.b64encode(b"print('x')\n").decode(),
        "filename": "notes.py",
    }
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\xff\xfe\x00binary")
    assert file_part(blob).mime == "application/octet-stream"
    from_bytes = file_part(b"a,b\n", mime="text/csv", filename="t.csv")
    assert (from_bytes.mime, from_bytes.filename) == ("text/csv", "t.csv")
    assert file_part(b"x", mime="text/plain").to_native().get("filename") is None
    image = tmp_path / "dot.png"
    image.write_bytes(png_bytes())
    assert (image_part(image).mime, image_part(image).filename) == ("image/png", "dot.png")
    assert image_part(png_bytes()).mime == "image/png"  # sniffed from the content
    assert file_part(image).mime == "image/png"  # guessed from the extension


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda p: text_part(""), "text is empty"),
        (lambda p: text_part(NOT_TEXT), "text must be a string"),
        (lambda p: file_part(b"x"), "file.mime is required"),
        (lambda p: file_part(b"x", mime="text"), "file.mime must look like"),
        (lambda p: file_part(b"", mime="text/plain"), "file is empty"),
        (lambda p: file_part(p / "missing.txt"), "file: cannot read"),
        (lambda p: file_part(p), "is not a regular file"),
        (lambda p: file_part(b"x", mime="text/plain", filename=""), "file.filename"),
        (lambda p: image_part(b"not an image"), "image: not a PNG"),
        (lambda p: image_part(b"not an image", mime="image/png"), "not a image/png image"),
        (lambda p: image_part(png_bytes(), mime="image/svg+xml"), "image.mime must be one of"),
        (lambda p: file_part(b"x" * (MAX_FILE_BYTES + 1), mime="text/plain"), "the limit"),
    ],
)
def test_builders_refuse_bad_input_naming_the_field(build: Any, field: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=field):
        build(tmp_path)


# -- the checks before sending ---------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "options", "message"),
    [
        ("   ", {}, "the prompt is empty"),
        ([], {}, "the prompt is empty"),
        ([" "], {}, "the prompt is empty"),
        (["ok", ""], {}, r"parts\[1\] is empty"),
        (["ok", 7], {}, r"parts\[1\] must be a string, TextPart or FilePart"),
        (["ok", FilePart(b"x", "bad mime")], {}, r"parts\[1\]\.mime must look like"),
        (["ok", FilePart(b"", "text/plain")], {}, r"parts\[1\] is empty \(0 bytes\)"),
        (["ok", FilePart(b"nope", "image/png")], {}, r"parts\[1\]: the content is not"),
        (["ok", TextPart("")], {}, r"parts\[1\]\.text is empty"),
        (None, {}, "parts must be a string or a list"),
        ("ok", {"files": ["/nonexistent/file.txt"]}, r"files\[0\]: file: cannot read"),
        ("ok", {"files": [3]}, r"files\[0\] must be a file part or a path"),
        ("ok", {"files": "a.txt"}, "files must be a list"),
        ("ok", {"system": ""}, "system is empty"),
        ("ok", {"system": 5}, "system must be a string"),
        ("ok", {"variant": ""}, "variant is empty"),
        ("ok", {"tools": ["bash"]}, "tools must be a mapping"),
        ("ok", {"tools": {"bash": "no"}}, r"tools\['bash'\] must be a bool"),
        ("ok", {"tools": {"": False}}, "tool names must be non-empty"),
        ("ok", {"agent": ""}, "agent must be a non-empty string"),
        ("ok", {"model": "nonsense"}, "model must look like"),
        # A surrogate code point cannot be encoded for the server (UnicodeEncodeError before).
        ("a\ud800b", {}, r"parts\[0\] holds a UTF-16 surrogate"),
        (["ok", "\ud83d\ude00"], {}, r"parts\[1\] holds a UTF-16 surrogate"),
        (["ok", TextPart("\udc00")], {}, r"parts\[1\]\.text holds a UTF-16 surrogate"),
        ("ok", {"system": "s\ud800"}, "system holds a UTF-16 surrogate"),
        ("ok", {"agent": "plan\ud800"}, "agent holds a UTF-16 surrogate"),
    ],
)
async def test_invalid_input_is_refused_and_nothing_is_sent(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, prompt: Any, options: Any, message: str
) -> None:
    await oc.start_session(T)
    with pytest.raises(InvalidInputError, match=message):
        await oc.send_turn(T, prompt, **options)
    assert prompts_sent(fake) == []
    assert oc.list_sessions()[0].active_turn_id is None


async def test_a_prompt_above_the_total_limit_is_refused(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    await oc.start_session(T)
    half = FilePart(b"x" * (MAX_FILE_BYTES), "text/plain")
    assert 3 * MAX_FILE_BYTES > MAX_PROMPT_BYTES >= 2 * MAX_FILE_BYTES
    with pytest.raises(InvalidInputError, match=r"parts: the prompt is .* the limit"):
        await oc.send_turn(T, ["ok", half, half, half])
    assert prompts_sent(fake) == []


# -- what reaches the fake -------------------------------------------------------------


async def test_a_plain_string_is_sent_as_before(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T)
    await oc.send_turn(T, "just text")
    await rec.wait_for("turn.completed")
    message = user_message(fake, info.session_id)
    assert [visible(p) for p in message.parts] == [{"type": "text", "text": "just text"}]
    assert "system" not in message.info and "tools" not in message.info
    assert fake.model_inputs[-1].content == ({"type": "text", "text": "just text"},)


async def test_a_text_file_is_stored_and_reaches_the_model_as_the_real_server_does(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tmp_path: Path
) -> None:
    info = await oc.start_session(T)
    notes = tmp_path / "notes.txt"
    notes.write_text("the secret is 42\n")
    await oc.send_turn(
        T,
        ["read this", text_part("and this")],
        files=[notes],
        system="Answer in French.",
        tools={"bash": False},
        variant="high",
    )
    await rec.wait_for("turn.completed")
    message = user_message(fake, info.session_id)
    url = "data:text/plain;base64," + base64.b64encode(b"the secret is 42\n").decode()
    assert [visible(p) for p in message.parts] == [
        {"type": "text", "text": "read this"},
        {"type": "text", "text": "and this"},
        {
            "type": "text",
            "text": 'Called the Read tool with the following input: {"filePath":"notes.txt"}',
            "synthetic": True,
        },
        {"type": "text", "text": "the secret is 42\n", "synthetic": True},
        {"type": "file", "mime": "text/plain", "filename": "notes.txt", "url": url},
    ]
    assert message.info["system"] == "Answer in French."
    assert message.info["tools"] == {"bash": False}
    assert message.info["model"]["variant"] == "high"
    answer = [m for m in fake.sessions[info.session_id].messages if m.role == "assistant"][-1]
    assert answer.info["variant"] == "high"
    seen = fake.model_inputs[-1]
    assert seen.message_id == message.id
    assert "the secret is 42" in seen.text and "read this" in seen.text
    assert seen.system == "Answer in French."
    assert not seen.offers("bash") and seen.offers("read")


async def test_an_image_reaches_the_model_only_with_the_image_modality(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await oc.start_session(T)
    image = image_part(png_bytes(), filename="dot.png")
    await oc.send_turn(T, ["look"], files=[image])
    await rec.wait_for("turn.completed")
    assert fake.model_inputs[-1].content[-1] == {
        "type": "text",
        "text": 'ERROR: Cannot read "dot.png" (this model does not support image input). '
        "Inform the user.",
    }
    fake.model_modalities = frozenset({"text", "image"})
    await oc.send_turn(T, ["look again", image])
    await rec.wait_for("turn.completed", lambda e: len(rec.of("turn.completed")) == 2)
    assert fake.model_inputs[-1].content[-1] == {
        "type": "image_url",
        "image_url": {"url": image.url},
    }


async def test_an_unsupported_file_type_fails_the_run(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """Measured: an ``application/json`` file part fails the run at once (the
    OpenAI-compatible provider takes no such file)."""
    await oc.start_session(T)
    await oc.send_turn(T, ["parse"], files=[file_part(b"{}", mime="application/json")])
    ended = await rec.wait_for("turn.completed")
    assert ended.state == "failed"
    assert "'file part media type application/json' functionality not supported" in str(ended.error)


async def test_the_fake_drops_a_prompt_whose_image_does_not_decode(
    fake: FakeOpenCodeServer,
) -> None:
    """Measured: ``prompt_async`` answers 204 and stores nothing; ``/message`` answers 400."""
    session_id = fake.add_session()
    bad = {"type": "file", "mime": "image/png", "url": "data:image/png;base64,AAAA"}
    async with fake.client() as client:
        body = {"parts": [{"type": "text", "text": "x"}, bad]}
        queued = await client.post(f"/session/{session_id}/prompt_async", json=body)
        assert queued.status_code == 204
        waited = await client.post(f"/session/{session_id}/message", json=body)
        assert waited.status_code == 400
    assert fake.sessions[session_id].messages == []
    assert fake.model_inputs == []


async def test_the_fake_answers_invalid_file_parts_and_options_as_the_real_server(
    fake: FakeOpenCodeServer,
) -> None:
    session_id = fake.add_session()
    cases = [
        ({"parts": [{"type": "file", "url": "data:,x"}]}, 'Missing key\n  at ["parts"][0]["mime"]'),
        ({"parts": [{"type": "file", "mime": "text/plain"}]}, 'at ["parts"][0]["url"]'),
        ({"parts": [], "system": 5}, 'Expected string | null, got 5\n  at ["system"]'),
        ({"parts": [], "variant": 3}, 'Expected string | null, got 3\n  at ["variant"]'),
        ({"parts": [], "tools": {"bash": "no"}}, 'Expected boolean, got "no"\n  at ["tools"]'),
    ]
    async with fake.client() as client:
        for body, message in cases:
            answer = await client.post(f"/session/{session_id}/prompt_async", json=body)
            assert answer.status_code == 400
            assert message in answer.json()["data"]["message"]


async def test_any_caller_string_with_a_surrogate_is_refused_naming_its_field(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    # The client's one check covers every body, not only the prompt's builders.
    with pytest.raises(InvalidInputError, match="create_session: title holds a UTF-16 surrogate"):
        await oc.start_session(T, title="a\ud800")
    assert [r for r in fake.requests if r.method == "POST" and r.path == "/session"] == []
    assert oc.list_sessions() == []
