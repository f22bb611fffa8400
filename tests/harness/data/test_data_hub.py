"""The Hugging Face hub path of the dataset source, against a loopback stand-in for the hub.

The stand-in answers the two requests `huggingface_hub.hf_hub_download` makes (HEAD for metadata, GET for
the bytes) at `/datasets/<repo>/resolve/<revision>/<file>`, so the real client code runs end to end offline.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.data.longmemeval import DataError, LongMemEvalSource
from tests.support.dataset_rows import make_row

REPO = "someone/longmemeval-cleaned"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _answer(self, with_body: bool) -> None:
                hub.requests.append((self.command, self.path))
                prefix = f"/datasets/{REPO}/resolve/"
                body = None
                if self.path.startswith(prefix):
                    revision, _, name = self.path[len(prefix) :].partition("/")
                    if revision in ("main", COMMIT):
                        body = hub.files.get(name)
                if body is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def do_HEAD(self) -> None:
                self._answer(False)

            def do_GET(self) -> None:
                self._answer(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub(monkeypatch, tmp_path):
    import huggingface_hub.constants as hf_constants

    # CI sets HF_HUB_OFFLINE=1; this test talks to a loopback server only.
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    rows = [make_row("b2"), make_row("a1"), make_row("m1", qtype="multi-session"), make_row("c3_abs")]
    data = json.dumps(rows).encode()
    fake = FakeHub({"longmemeval_s_cleaned.json": data})
    yield fake, data
    fake.close()


def hub_source(fake: FakeHub, **kw) -> LongMemEvalSource:
    base = dict(name="hub", filename=None, hf_repo=REPO, hf_filename="longmemeval_s_cleaned.json", hf_endpoint=fake.url)
    return LongMemEvalSource(**{**base, **kw})


def test_hub_file_is_downloaded_filtered_and_pinned_to_the_resolved_commit(hub):
    fake, data = hub
    cases, prov = hub_source(fake, hf_sha256=hashlib.sha256(data).hexdigest()).load()
    assert [c.question_id for c in cases] == ["a1", "b2", "c3_abs"]  # single-session-user only, sorted
    assert prov["source"] == f"hf://{REPO}@{COMMIT}/longmemeval_s_cleaned.json"
    assert prov["verified"] is True and prov["n_total"] == 4
    assert any(method == "GET" for method, _ in fake.requests)


def test_hub_file_with_another_digest_is_refused(hub):
    fake, _ = hub
    with pytest.raises(DataError, match=f"hf://{REPO}@{COMMIT}/longmemeval_s_cleaned.json: sha256 mismatch"):
        hub_source(fake, hf_sha256="0" * 64).load()


def test_missing_hub_file_names_repo_revision_file_and_endpoint(hub):
    fake, _ = hub
    with pytest.raises(DataError) as e:
        hub_source(fake, hf_filename="nope.json").load()
    msg = str(e.value)
    assert f"hf://{REPO}@main/nope.json" in msg and fake.url in msg and "download failed" in msg


def test_unreachable_hub_is_a_clear_data_error(hub, monkeypatch):
    import time

    monkeypatch.setattr(time, "sleep", lambda s: None)  # skip huggingface_hub's ~23 s of retry back-off
    fake, _ = hub
    url = fake.url
    fake.close()
    with pytest.raises(DataError, match="download failed"):
        hub_source(fake, hf_endpoint=url).load()


def test_a_local_file_wins_over_the_hub(hub, write_dataset):
    fake, _ = hub
    p = write_dataset([make_row("local1")])
    cases, prov = hub_source(fake, filename=p.name, search_dirs=[str(p.parent)]).load()
    assert [c.question_id for c in cases] == ["local1"] and prov["source"] == str(p)
    assert fake.requests == []
