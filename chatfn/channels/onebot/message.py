"""OneBot v11 message format: segment arrays and CQ-code strings, both ways.

An implementation posts a message either as an array of segments
(`[{"type": "text", "data": {"text": "hi"}}, {"type": "at", "data": {"qq": "10001"}}]`) or as
a CQ-code string (`hi[CQ:at,qq=10001]`), depending on its `message_post_format` setting. The
channel normalises both to segments here, so nothing else in the bot sees either format.

CQ-code escaping (OneBot v11, message/string.md): in plain text `&`, `[`, `]` become `&amp;`,
`&#91;`, `&#93;`; inside a parameter value `,` also becomes `&#44;`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Segment = dict[str, Any]

_TEXT_ESCAPES = (("&", "&amp;"), ("[", "&#91;"), ("]", "&#93;"))
_CQ = re.compile(r"\[CQ:([A-Za-z0-9_.\-]+)((?:,[^\[\]]*)?)\]")  # [ and ] are escaped inside


def escape(text: str, *, in_param: bool = False) -> str:
    """Escape text for a CQ-code string; `in_param` also escapes commas (parameter values)."""
    for raw, esc in _TEXT_ESCAPES:
        text = text.replace(raw, esc)
    if in_param:
        text = text.replace(",", "&#44;")
    return text


def unescape(text: str) -> str:
    """Undo `escape`; `&amp;` goes last so `&amp;#91;` stays the literal text `&#91;`."""
    return (
        text.replace("&#44;", ",").replace("&#91;", "[").replace("&#93;", "]").replace("&amp;", "&")
    )


def parse_cq(message: str) -> list[Segment]:
    """Split a CQ-code string into segments. Text outside codes becomes `text` segments; a
    malformed `[CQ:` (no closing bracket) is kept as text rather than dropped."""
    segments: list[Segment] = []
    pos = 0
    for m in _CQ.finditer(message):
        if m.start() > pos:
            segments.append(text_segment(unescape(message[pos : m.start()])))
        data: dict[str, str] = {}
        for pair in m.group(2).split(",")[1:]:
            key, sep, value = pair.partition("=")
            if key:
                data[key] = unescape(value) if sep else ""
        segments.append({"type": m.group(1), "data": data})
        pos = m.end()
    if pos < len(message):
        segments.append(text_segment(unescape(message[pos:])))
    return segments


def to_cq(segments: list[Segment]) -> str:
    """Render segments as a CQ-code string (for implementations that only take strings)."""
    parts: list[str] = []
    for seg in segments:
        data = seg.get("data") or {}
        if seg.get("type") == "text":
            parts.append(escape(str(data.get("text", ""))))
            continue
        params = "".join(f",{k}={escape(str(v), in_param=True)}" for k, v in data.items())
        parts.append(f"[CQ:{seg.get('type')}{params}]")
    return "".join(parts)


def normalize(message: Any) -> list[Segment]:
    """Segments from whatever an implementation posted: an array, a single segment object, or a
    CQ-code string. Unknown shapes become an empty message rather than an exception: one odd
    event must not break the connection's reader."""
    if isinstance(message, str):
        return parse_cq(message)
    if isinstance(message, dict) and "type" in message:
        message = [message]
    if not isinstance(message, list):
        return []
    out: list[Segment] = []
    for seg in message:
        if isinstance(seg, dict) and isinstance(seg.get("type"), str):
            data = seg.get("data")
            out.append({"type": seg["type"], "data": data if isinstance(data, dict) else {}})
    return out


def text_segment(text: str) -> Segment:
    return {"type": "text", "data": {"text": text}}


def at_segment(qq: str) -> Segment:
    return {"type": "at", "data": {"qq": str(qq)}}


def reply_segment(message_id: str) -> Segment:
    return {"type": "reply", "data": {"id": str(message_id)}}


# Segment types shown to the model as a short placeholder instead of being dropped, so "what is
# in this picture?" still makes sense in history.
_PLACEHOLDERS = {
    "image": "[image]",
    "face": "[face]",
    "record": "[voice]",
    "video": "[video]",
    "file": "[file]",
    "share": "[link]",
    "location": "[location]",
    "forward": "[forwarded messages]",
    "json": "[card]",
    "xml": "[card]",
}


@dataclass(slots=True)
class ParsedMessage:
    """What the bot needs from a message: its readable text, whether it addresses the bot, and
    the message it quotes."""

    text: str
    at_bot: bool = False
    at_targets: list[str] = field(default_factory=list)
    reply_id: str | None = None
    # Image references (`url`, else `file` when it is a URL or base64): for vision models.
    images: list[str] = field(default_factory=list)
    # Voice (`record` segments, SILK or AMR as the client gives it): for speech to text.
    audio: list[str] = field(default_factory=list)


def image_ref(data: dict[str, Any]) -> str | None:
    """An image segment's reference: its `url`, else its `file` when that is an http(s) URL or
    `base64://` data (NapCat, Lagrange and LLOneBot fill one or the other)."""
    for key in ("url", "file"):
        value = str(data.get(key) or "")
        if value.startswith(("http://", "https://")):
            return value
        if value.startswith("base64://"):
            return "data:image/unknown;base64," + value[len("base64://") :]
    return None


def audio_ref(data: dict[str, Any]) -> str | None:
    """A `record` segment's reference, as `image_ref` reads an image's (the client's own
    download URL, or the file as base64)."""
    ref = image_ref(data)
    return ref.replace("data:image/unknown;", "data:audio/unknown;", 1) if ref else None


def parse_message(segments: list[Segment], self_id: str) -> ParsedMessage:
    """Plain text of the message for the bot. An `at` to the bot itself is removed from the
    text (the model should not see its own mention) and sets `at_bot`; other mentions stay as
    `@<qq>`; `at` with `qq=all` does not count as addressing the bot."""
    parts: list[str] = []
    at_bot = False
    targets: list[str] = []
    reply_id: str | None = None
    images: list[str] = []
    audio: list[str] = []
    for seg in segments:
        kind, data = seg["type"], seg["data"]
        if kind == "text":
            parts.append(str(data.get("text", "")))
        elif kind == "at":
            qq = str(data.get("qq", ""))
            targets.append(qq)
            if qq == str(self_id):
                at_bot = True
            else:
                parts.append(f"@{data.get('name') or qq}")
        elif kind == "reply":
            reply_id = str(data.get("id", "")) or None
        elif kind == "record" and (voice := audio_ref(data)):
            audio.append(voice)  # transcribed into the text (no placeholder needed)
        elif kind in _PLACEHOLDERS:
            parts.append(_PLACEHOLDERS[kind])
            if kind == "image" and (ref := image_ref(data)):
                images.append(ref)
    return ParsedMessage(
        text=_join(parts),
        at_bot=at_bot,
        at_targets=targets,
        reply_id=reply_id,
        images=images,
        audio=audio,
    )


def _join(parts: list[str]) -> str:
    """Concatenate text parts, keeping a mention apart from the word after it (clients put a
    space after a mention, but not always), and trim what the bot's removed mention left.

    Linear in the total length: the state of the text so far (does it start with a mention,
    does its last word) is carried along, never recomputed from the joined string, because a
    message of thousands of segments (16000 CQ codes) must not stall every channel."""
    pieces: list[str] = []
    starts_at = False
    last_word = "empty"  # "empty" (nothing since the last space) | "at" | "other"
    for part in parts:
        if pieces and (starts_at or last_word == "at") and part and not part[0].isspace():
            pieces.append(" ")
            last_word = "empty"
        if not part:
            continue
        if not pieces:
            starts_at = part[0] == "@"
        pieces.append(part)
        cut = part.rfind(" ")
        if cut >= 0:
            tail = part[cut + 1 :]
            last_word = "empty" if not tail else ("at" if tail[0] == "@" else "other")
        elif last_word == "empty":
            last_word = "at" if part[0] == "@" else "other"
    return "".join(pieces).strip()


def image_segment(ref: str) -> Segment:
    """An outgoing image: a URL as it is, a data URI as OneBot's `base64://`."""
    if ref.startswith("data:"):
        ref = "base64://" + ref.partition(",")[2]
    return {"type": "image", "data": {"file": ref}}


def outgoing_segments(
    text: str,
    *,
    at: str | None = None,
    reply_to: str | None = None,
    images: Sequence[str] = (),
) -> list[Segment]:
    """The segment array for one outgoing message part: an optional quote of the message being
    answered, an optional mention, the text, then any images."""
    segments: list[Segment] = []
    if reply_to:
        segments.append(reply_segment(reply_to))
    if at:
        segments.append(at_segment(at))
        text = " " + text if text else text
    if text or not images:
        segments.append(text_segment(text))
    segments.extend(image_segment(ref) for ref in images)
    return segments
