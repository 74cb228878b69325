"""``ThreadRecord``: every field checked as the web API checks its input, whether the
app builds the record or a database hands it back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
import pytest

from adapter import InvalidInputError, PermissionRule
from adapter.web import ThreadRecord
from tests.web.store.conftest import CURSOR, make_record


def test_new_stamps_both_times_and_changed_moves_only_updated_at() -> None:
    record = make_record(title="a")
    assert record.created_at == record.updated_at and record.created_at.tzinfo is not None
    later = record.changed(title="b", turn_id="turn_2", status="running")
    assert (later.title, later.turn_id, later.status) == ("b", "turn_2", "running")
    assert later.created_at == record.created_at and later.updated_at >= record.updated_at
    assert record.title == "a"  # frozen: a copy
    with pytest.raises(AttributeError):
        record.title = "c"  # type: ignore[misc]


def test_to_dict_is_json_ready_and_round_trips() -> None:
    record = make_record(permissions=(PermissionRule("edit", "*", "ask"),))
    data = record.to_dict()
    assert data["permissions"] == [{"permission": "edit", "pattern": "*", "action": "ask"}]
    assert isinstance(data["created_at"], str)
    assert msgspec.convert(data, ThreadRecord, strict=False) == record


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"thread_id": ".."}, "thread_id must be"),
        ({"thread_id": "a/b"}, "thread_id must be"),
        ({"thread_id": "x" * 201}, "thread_id must be"),
        ({"thread_id": "\ud800"}, "thread_id must be"),
        ({"base_url": "http://user:pw-s3cret@127.0.0.1:4096"}, "must not carry credentials"),
        ({"base_url": "http://127.0.0.1:4096/?token=pw-s3cret"}, "query string"),
        ({"base_url": "ftp://127.0.0.1"}, "http"),
        ({"resume": {"schema": 2, "session_id": "ses_abc"}}, "resume must be a cursor"),
        ({"resume": {"schema": 1, "session_id": "../etc"}}, "resume must be a cursor"),
        ({"resume": {**CURSOR, "directory": 5}}, "resume.directory"),
        ({"title": ""}, "title"),
        ({"agent": "\udfff"}, "agent"),
        ({"permissions": "yolo"}, "permissions must be one of"),
        ({"permissions": ()}, "empty list"),
        ({"status": "exploded"}, "status"),
        ({"created_at": datetime(2025, 1, 1)}, "timezone-aware"),
    ],
)
def test_a_bad_field_is_refused_naming_it(fields: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = make_record().to_dict()
    base.update(created_at=make_record().created_at, updated_at=make_record().updated_at)
    base.update(fields)
    with pytest.raises(InvalidInputError, match=message) as caught:
        ThreadRecord(**base)
    assert "s3cret" not in str(caught.value)
