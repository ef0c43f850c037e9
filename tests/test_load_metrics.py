"""``load --metrics-url`` (``fastsse.load._metrics``): the server's Prometheus metrics, before
and after a run.

The expositions are written here the way vLLM (prometheus_client: ``# TYPE x counter`` with
``x_total`` and ``x_created`` samples), SGLang and TGI write them; the expected changes are counted
from what the test's server was asked. Histogram quantiles follow Prometheus's
``histogram_quantile``: linear within the bucket the rank falls in.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from fastsse.cli import load as load_cli
from fastsse.load import _metrics as metrics


def test_counters_histograms_and_gauges_change_as_the_server_counted() -> None:
    before = metrics.parse(
        "# HELP vllm:request_success Count of successfully processed requests.\n"
        "# TYPE vllm:request_success counter\n"
        'vllm:request_success_total{finished_reason="stop",model_name="m"} 10.0\n'
        'vllm:request_success_created{finished_reason="stop",model_name="m"} 1.7e9\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 4.0\n'
        'vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} 10.0\n'
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 10.0\n'
        'vllm:time_to_first_token_seconds_sum{model_name="m"} 2.0\n'
        'vllm:time_to_first_token_seconds_count{model_name="m"} 10.0\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 0.0\n'
        "sglang:prompt_tokens_total 100\n"  # no TYPE line: a _total is a counter
        "tgi_queue_size 3\n"
    )
    after = metrics.parse(
        "# TYPE vllm:request_success counter\n"
        'vllm:request_success_total{finished_reason="stop",model_name="m"} 30.0\n'
        'vllm:request_success_created{finished_reason="stop",model_name="m"} 1.7e9\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 14.0\n'
        'vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} 30.0\n'
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 30.0\n'
        'vllm:time_to_first_token_seconds_sum{model_name="m"} 5.0\n'
        'vllm:time_to_first_token_seconds_count{model_name="m"} 30.0\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 0.0\n'
        "sglang:prompt_tokens_total 160\n"
        "tgi_queue_size 1\n"
    )
    found = metrics.changes(before, after)
    assert found["counters"] == {
        'vllm:request_success_total{finished_reason="stop",model_name="m"}': 20.0,
        "sglang:prompt_tokens_total": 60.0,
    }
    ttft = found["histograms"]['vllm:time_to_first_token_seconds{model_name="m"}']
    assert (ttft["count"], ttft["sum"], ttft["mean"]) == (20.0, 3.0, 0.15)
    # the run added 10 observations under 0.1 s and 10 between 0.1 and 0.5: the median is 0.1,
    # p90 ranks 18 of 20: 8 of the 10 in (0.1, 0.5]
    assert ttft["p50"] == pytest.approx(0.1)
    assert ttft["p90"] == pytest.approx(0.1 + 0.4 * 8 / 10)
    assert found["gauges"] == {"tgi_queue_size": [3.0, 1.0]}  # the unmoved gauge is left out


def test_a_counter_that_went_down_counts_from_zero() -> None:
    before = metrics.parse("# TYPE x counter\nx_total 50\n")
    after = metrics.parse("# TYPE x counter\nx_total 7\n")
    assert metrics.changes(before, after)["counters"] == {"x_total": 7.0}


def test_a_quantile_in_the_open_bucket_is_its_lower_bound() -> None:
    assert metrics._quantile(99.0, [(0.1, 1.0), (1.0, 2.0), (float("inf"), 10.0)]) == 1.0
    assert metrics._quantile(50.0, [(float("inf"), 0.0)]) is None


def test_the_metrics_page_of_an_api_base_url() -> None:
    assert metrics.metrics_url("http://h:8000/v1") == "http://h:8000/metrics"
    assert metrics.metrics_url("http://h:8000/v1/") == "http://h:8000/metrics"
    assert metrics.metrics_url("http://h:8000/api") == "http://h:8000/api/metrics"


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    requests_served = 0
    prompt_words = 0
    lock = threading.Lock()


class _Handler(http.server.BaseHTTPRequestHandler):
    """A chat stream of 3 tokens for each POST; vLLM-style counters of them at /metrics."""

    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        s = self.server
        with s.lock:
            n, words = s.requests_served, s.prompt_words
        body = (
            "# TYPE vllm:request_success counter\n"
            f'vllm:request_success_total{{finished_reason="stop",model_name="m"}} {n}.0\n'
            "# TYPE vllm:prompt_tokens counter\n"
            f'vllm:prompt_tokens_total{{model_name="m"}} {words}.0\n'
            "# TYPE vllm:e2e_request_latency_seconds histogram\n"
            f'vllm:e2e_request_latency_seconds_bucket{{le="0.05",model_name="m"}} {n}.0\n'
            f'vllm:e2e_request_latency_seconds_bucket{{le="+Inf",model_name="m"}} {n}.0\n'
            f'vllm:e2e_request_latency_seconds_sum{{model_name="m"}} {n * 0.01}\n'
            f'vllm:e2e_request_latency_seconds_count{{model_name="m"}} {n}.0\n'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        request = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
        words = len(request["messages"][-1]["content"].split())
        chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
        chunks += [{"choices": [{"index": 0, "delta": {"content": f" w{k}"}}]} for k in range(3)]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with self.server.lock:
            self.server.requests_served += 1
            self.server.prompt_words += words


@pytest.fixture(scope="module")
def counted() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_a_run_reports_what_it_changed_in_the_servers_metrics(
    counted: _Server, capsys: Any, tmp_path: Any
) -> None:
    base = f"http://127.0.0.1:{counted.server_address[1]}/v1"
    counted.requests_served = 5  # the server had work before the run: only the run's counts
    out = tmp_path / "run.json"
    argv = [base, "--model", "m", "--requests", "6", "--prompt", "one two three", "--metrics-url"]
    assert load_cli.main([*argv, "--quiet", "--json", str(out)]) == 0
    found = orjson.loads(out.read_bytes())["server_metrics"]
    assert found["url"] == f"http://127.0.0.1:{counted.server_address[1]}/metrics"
    assert found["counters"] == {
        'vllm:request_success_total{finished_reason="stop",model_name="m"}': 6.0,
        'vllm:prompt_tokens_total{model_name="m"}': 18.0,
    }
    e2e = found["histograms"]['vllm:e2e_request_latency_seconds{model_name="m"}']
    assert e2e["count"] == 6.0 and e2e["mean"] == pytest.approx(0.01)
    text = capsys.readouterr().out
    assert 'vllm:request_success_total{finished_reason="stop",model_name="m"} +6' in text
    # the quantiles are the server's buckets' (the reader must not take them for the client's)
    assert "histogram quantiles: interpolated within the server's buckets" in text


def test_a_metrics_page_that_cannot_be_read_stops_the_run_first(capsys: Any) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = load_cli.main([f"http://127.0.0.1:{port}/v1", "--model", "m", "--metrics-url", "--quiet"])
    assert code == 2
    assert f"--metrics-url http://127.0.0.1:{port}/metrics" in capsys.readouterr().err
