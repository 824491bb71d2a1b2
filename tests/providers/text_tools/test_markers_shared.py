"""The marker index is built once per set of offered names and shared by every parser
(providers/text_tools/markers.py `markers_for`): a parser is made for each native request with
tools, and building the index each time was CPU on every message. That sharing changes no
parse is what the rest of this folder's tests show, run against the shared index."""

from __future__ import annotations

from providers.text_tools.parser import StreamingToolParser


def test_parsers_for_the_same_names_share_one_marker_index() -> None:
    a = StreamingToolParser(["get_weather"])
    b = StreamingToolParser(["get_weather"])
    # `response` is also a fixed marker: offering it makes a different index.
    c = StreamingToolParser(["get_weather", "response"])
    assert a._markers is b._markers
    assert c._markers is not a._markers
    assert c._markers.by_prefix != a._markers.by_prefix
