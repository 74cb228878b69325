"""The foundation every layer may use: identifiers (``_ids``: validation, and minting message
ids that sort after the server's), well-formed text out of UTF-16 strings (``_unicode``),
how deep decoded JSON nests (``_nesting``), its string fields read one way (``_json_fields``),
JSON-ready copies of records (``_jsonable``), the ownership of background asyncio tasks
(``_task_owner``: every task the adapter starts is awaited by it), the bounded caches of ids
(``_bounded_set``), and the ``with``/``async with`` of an object that only closes on the way
out (``_closing``).

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""
