"""Generated inputs for the learned recall trigger's artifact loader (harness/retrieval/recall_trigger.py): every
spoilt file, whatever the spoiling, is one RecallTriggerError naming the file, or it loads and then means exactly
what the file says (no value coerced on the way in). Seeded, offline, no model."""

from __future__ import annotations

import copy
import json
import math
import random
from typing import Any

import numpy as np
import pytest

from harness.retrieval import recall_trigger as rt
from harness.retrieval.embedders import HashingEmbedder

DIM, BUCKETS = 8, 4
POOL: list[Any] = [
    None, True, False, 0, 1, -1, 2, 0.5, 1.5, -3.25, float("nan"), float("inf"), 10**30, "", "x", "0.5", "true",
    rt.FORMAT, "hashing:8", [], {}, [1.0], [True], ["1.0"], {"a": 1}, [[0.0] * 3], 0.0,
]  # fmt: skip


def _valid() -> dict[str, Any]:
    e = HashingEmbedder(DIM)
    w = np.round(np.random.default_rng(0).normal(size=DIM + BUCKETS), 6)
    trig = rt.RecallTrigger(rt.Features(True, BUCKETS), w, 0.25, e.identity, DIM, 0.5)
    return trig.to_json({"questions": 3, "question_ids_sha256": "0" * 64})


def _paths(obj: Any, at: tuple = ()) -> list[tuple]:
    out = [at]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*at, i))
    return out


def _set(obj: Any, at: tuple, value: Any, delete: bool = False) -> Any:
    if not at:
        return value
    parent = obj
    for k in at[:-1]:
        parent = parent[k]
    if delete:
        del parent[at[-1]]
    else:
        parent[at[-1]] = value
    return obj


def _spoilt(rng: random.Random) -> tuple[str, str]:
    """(a description, the file's text): a value replaced or deleted anywhere, or the text cut, mangled or nested."""
    data = _valid()
    text = json.dumps(data)
    kind = rng.choice(["replace", "replace", "replace", "delete", "truncate", "byte", "nest", "digits"])
    if kind in ("replace", "delete"):
        at = rng.choice(_paths(data)[1:] if kind == "delete" else _paths(data))
        value = copy.deepcopy(rng.choice(POOL))
        return f"{kind} {at} {value!r:.40}", json.dumps(_set(data, at, value, delete=kind == "delete"))
    if kind == "truncate":
        cut = rng.randrange(len(text))
        return f"truncate at {cut}", text[:cut]
    if kind == "byte":
        i = rng.randrange(len(text))
        return f"byte {i}", text[:i] + rng.choice(["\x00", "}", "]", '"', ",", "\ufffd", "e", "-"]) + text[i + 1 :]
    if kind == "nest":
        n = rng.choice([3, 900, 5_000, 200_000])
        return f"nest {n}", text.replace('"bias": 0.25', '"bias": ' + "[" * n + "0" + "]" * n)
    return "digits", text.replace('"bias": 0.25', '"bias": ' + "7" * rng.choice([20, 400, 5_000]))


def _strictly_equal(a: Any, b: Any) -> bool:
    """JSON equality that tells true from 1 and a string from a number (Python's == does not)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("seed", range(6))
def test_every_spoilt_artifact_is_one_error_naming_the_file_or_means_what_it_says(tmp_path, seed):
    rng = random.Random(seed)
    e = HashingEmbedder(DIM)
    loaded = refused = 0
    for n in range(120):
        how, text = _spoilt(rng)
        path = tmp_path / f"t{n}.json"  # a new file each time: the loader caches by path, mtime and size
        path.write_text(text)
        try:
            trig = rt.load(path)
        except rt.RecallTriggerError as err:
            assert str(path.resolve()) in str(err), (how, str(err))
            refused += 1
            continue
        loaded += 1
        data = json.loads(text)  # it loaded, so it is JSON; every value used is the file's own, uncoerced
        assert data["format"] == rt.FORMAT, how
        assert _strictly_equal(trig.features.embedding, data["features"]["embedding"]), how
        assert _strictly_equal(trig.features.ngram_buckets, data["features"]["ngram_buckets"]), how
        assert _strictly_equal(trig.embedder, data["embedder"]["identity"]), how
        assert _strictly_equal(trig.dim, data["embedder"]["dim"]), how
        assert _strictly_equal(trig.bias, data["bias"]) and math.isfinite(trig.bias), how
        assert _strictly_equal(trig.threshold, data["threshold"]) and 0 <= trig.threshold <= 1, how
        assert len(trig.weights) == len(data["weights"]), how
        assert all(_strictly_equal(float(w), v) for w, v in zip(trig.weights, data["weights"], strict=True)), how
        try:  # a loaded trigger either scores a query as a probability or refuses the embedder by name
            p = trig.probability(["what did you recommend for tea"], e)
        except rt.RecallTriggerError as err:
            assert str(path.resolve()) in str(err), (how, str(err))
        else:
            assert p.shape == (1,) and 0.0 <= float(p[0]) <= 1.0, how
    assert loaded and refused  # the generator makes both kinds (a spoilt provenance or weight value still loads)


def test_the_probe_refuses_what_the_old_loader_coerced(tmp_path):
    """The coercions the strict reading closed, each seen by the probe's generator: a string or number for a bool,
    a fractional bucket count, a numeric string weight, a threshold outside [0, 1], a NaN threshold."""
    spoils = {
        "embedding-string": ("features", "embedding", "false"),
        "embedding-int": ("features", "embedding", 1),
        "buckets-fraction": ("features", "ngram_buckets", 4.5),
        "threshold-range": (None, "threshold", 1.5),
        "threshold-nan": (None, "threshold", float("nan")),
        "identity-number": ("embedder", "identity", 8),
    }
    for name, (outer, key, value) in spoils.items():
        data = _valid()
        (data[outer] if outer else data)[key] = value
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        with pytest.raises(rt.RecallTriggerError, match=key):
            rt.load(path)
    data = _valid()
    data["weights"][2] = "1.0"
    (tmp_path / "w.json").write_text(json.dumps(data))
    with pytest.raises(rt.RecallTriggerError, match=r"weights\[2\]"):
        rt.load(tmp_path / "w.json")
