"""Generated-input probe of the prebuilt runtime's request check (harness/llm/xllama_server.py `check_request`,
no model needed): seeded random bodies of known fields are accepted; any body with unknown or misspelled fields
(a dropped or swapped letter, another case, a homoglyph, camelCase, stray whitespace, streaming options) is
refused with every unknown field named and no known one."""

from __future__ import annotations

import random

import pytest

from harness.llm.xllama_server import BadRequest, check_request

KNOWN = {
    "model": lambda r: r.choice(["local", "", "qwen"]),
    "messages": lambda r: [{"role": "user", "content": r.choice(["hi", "", "ü🐈"])}] * r.randrange(1, 4),
    "tools": lambda r: r.choice([None, [], [{"type": "function", "function": {"name": "f"}}]]),
    "tool_choice": lambda r: r.choice([None, "auto", "none", "required", {"function": {"name": "f"}}]),
    "temperature": lambda r: r.choice([0, 0.7, None]),
    "top_p": lambda r: r.choice([1, 0.9, None]),
    "max_tokens": lambda r: r.choice([1, 256, None]),
    "stop": lambda r: r.choice([None, "\n", ["a", "b"]]),
    "seed": lambda r: r.choice([None, 0, 42]),
    "n": lambda r: 1,
    "response_format": lambda r: r.choice(
        [None, {"type": "text"}, {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": {}}}]
    ),
}
OTHERS = ["stream", "stream_options", "logprobs", "frequency_penalty", "user", "functions"]


def misspell(r: random.Random, name: str) -> str:
    i = r.randrange(len(name))
    kind = r.randrange(7)
    if kind == 0:
        out = name[:i] + name[i + 1 :]
    elif kind == 1 and len(name) > 1:
        i = min(i, len(name) - 2)
        out = name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    elif kind == 2:
        out = name.upper() if r.random() < 0.5 else name.capitalize()
    elif kind == 3:
        out = name.replace("e", "\u0435", 1).replace("o", "\u043e", 1)  # Cyrillic look-alikes
    elif kind == 4:
        parts = name.split("_")
        out = parts[0] + "".join(p.capitalize() for p in parts[1:]) + ("" if "_" in name else "s")
    elif kind == 5:
        out = r.choice([" ", "\t", "_"]) + name if r.random() < 0.5 else name + r.choice([" ", "s", "_"])
    else:
        out = name[:i] + r.choice("xyz-") + name[i:]
    return out if out not in KNOWN else out + "_"


def body(r: random.Random) -> dict:
    req = {"messages": KNOWN["messages"](r)}
    for k in r.sample(sorted(KNOWN), r.randrange(len(KNOWN))):
        req[k] = KNOWN[k](r)
    return req


@pytest.mark.parametrize("seed", range(200))
def test_known_fields_are_accepted(seed: int) -> None:
    req = body(random.Random(seed))
    assert check_request(req) is req["messages"]


@pytest.mark.parametrize("seed", range(200))
def test_unknown_or_misspelled_fields_are_refused_by_name(seed: int) -> None:
    r = random.Random(seed)
    req = body(r)
    unknown = {misspell(r, r.choice(sorted(KNOWN))) for _ in range(r.randrange(1, 4))}
    if r.random() < 0.3:
        unknown.add(r.choice(OTHERS))
    for name in unknown:
        req[name] = r.choice([None, 0, "x", True, [], {}])
    assert not unknown & set(KNOWN)
    with pytest.raises(BadRequest) as err:
        check_request(req)
    named = str(err.value).split(": ", 1)[1].split(", ")
    assert named == sorted(unknown), (named, sorted(unknown))
