"""`help` is a command for people: the model is offered it only when `help.offer_to_model`."""

from __future__ import annotations

from pathlib import Path

from chatfn.testing import ScriptedModel, TestBot, call, say


async def test_help_not_offered_to_the_model_by_default(tmp_path: Path) -> None:
    model = ScriptedModel([say("Hi."), call("help"), say("No.")])
    tb = TestBot(tmp_path, model=model)
    assert await tb.send("hello") == ["Hi."]
    offered = {t.name for t in model.requests[0].tools}
    assert "help" not in offered and "reminder_set" in offered
    # The slash command still works for people.
    (listing,) = await tb.send("/help")
    assert "/reminder_set" in listing
    # A model that calls it anyway is refused in code, not run.
    assert await tb.send("what can you do?") == ["No."]
    refused = model.requests[-1].messages[-1]
    assert refused.role == "tool" and "not offered to the model" in (refused.content or "")
    await tb.aclose()


async def test_help_offered_when_configured(tmp_path: Path) -> None:
    model = ScriptedModel([call("help")])
    tb = TestBot(tmp_path, model=model, config={"help": {"offer_to_model": True}})
    (listing,) = await tb.send("what can you do?")
    assert "help" in {t.name for t in model.requests[0].tools}
    assert "/reminder_set" in listing
    await tb.aclose()
