"""The bot's counts, rendered in Prometheus' text format only on a scrape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chatfn.common.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counts_render_as_prometheus_counters_histograms_and_gauge() -> None:
    m = Metrics()
    m.messages_in.labels("http").inc()
    m.messages_in.labels("http").inc(2)
    m.model_tokens.labels("beta", "prompt").inc(40)
    for seconds in (0.1, 0.3, 3.0, 500.0):
        m.model_latency.labels("beta").observe(seconds)
    m.watch_outbox(lambda: 7)
    body, content_type = m.render()
    assert content_type.startswith("text/plain")
    s = _samples(body.decode())
    assert s[("chatfn_messages_in_total", (("channel", "http"),))] == 3
    assert s[("chatfn_model_tokens_total", (("kind", "prompt"), ("model", "beta")))] == 40
    bucket = "chatfn_model_latency_seconds_bucket"
    assert s[(bucket, (("le", "0.25"), ("model", "beta")))] == 1  # cumulative buckets
    assert s[(bucket, (("le", "0.5"), ("model", "beta")))] == 2
    assert s[(bucket, (("le", "4.0"), ("model", "beta")))] == 3
    assert s[(bucket, (("le", "128.0"), ("model", "beta")))] == 3
    assert s[(bucket, (("le", "+Inf"), ("model", "beta")))] == 4
    assert s[("chatfn_model_latency_seconds_count", (("model", "beta"),))] == 4
    assert s[("chatfn_model_latency_seconds_sum", (("model", "beta"),))] == pytest.approx(503.4)
    assert s[("chatfn_outbox_depth", ())] == 7
    # A second scrape sees later counts (the registry is made once, the values read each time).
    m.messages_in.labels("http").inc()
    assert (
        _samples(m.render()[0].decode())[("chatfn_messages_in_total", (("channel", "http"),))] == 4
    )


def test_wrong_label_count_and_negative_increment_are_errors() -> None:
    m = Metrics()
    with pytest.raises(ValueError):
        m.messages_in.labels("http", "extra")
    with pytest.raises(ValueError):
        m.messages_in.labels("http").inc(-1)


def test_counting_does_not_import_prometheus_client() -> None:
    code = (
        "import sys\n"
        "from chatfn.common.metrics import Metrics\n"
        "m = Metrics(); m.messages_in.labels('x').inc(); m.model_latency.labels('x').observe(1)\n"
        "assert 'prometheus_client' not in sys.modules, 'imported before a scrape'\n"
        "m.render()\n"
        "assert 'prometheus_client' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
