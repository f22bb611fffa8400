"""LongMemEval loading: local .json/.json.gz or the Hugging Face hub → validated `Case`s.

Every failure names the file (and, for schema errors, the record and field) so a user can fix the input.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

from harness.data.jsonarray import array_of_objects
from harness.session.events import Event
from harness.settings import yaml_defaults

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_AUTHOR = "lme-eval-agent"  # the reference seeds assistant turns with the agent's name as author
BASE_TIMESTAMP = 1_700_000_000.0  # synthetic, monotonic timestamps (the reference uses created_at + i ms)
# Namespace of the deterministic UUID event ids (`wire.event_ids=uuid`): any fixed UUID works, it only has to stay put.
EVENT_ID_NAMESPACE = uuid.UUID("5b0e7c1e-3d2a-4c7f-9a61-2f4e8d9c0b17")
EVENT_ID_STYLES = ("sequential", "uuid")
# "session": each event carries its haystack session's date (haystack_dates), sessions in date order as the
# official LongMemEval prompt sorts them; "ms"/"us" are synthetic times that ignore the benchmark's dates.
TIMESTAMP_STYLES = ("ms", "us", "session")
LME_DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # haystack_dates / question_date, e.g. "2023/05/20 (Sat) 02:21"
QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)

REQUIRED_FIELDS: dict[str, type | tuple[type, ...]] = {
    "question_id": str,
    "question_type": str,
    "question": str,
    "answer": (str, int, float, bool, list, dict),
    "haystack_sessions": list,
}


class DataError(ValueError):
    """Bad dataset input; the message names the file and, where it applies, the record and field."""


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    has_answer: bool = False


@dataclass(frozen=True)
class Case:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    sessions: tuple[tuple[Turn, ...], ...]
    session_ids: tuple[str, ...]
    session_dates: tuple[str, ...]
    answer_session_ids: tuple[str, ...]

    @property
    def is_abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    @property
    def has_evidence_label(self) -> bool:
        """Some turn carries `has_answer` (what turn-level retrieval metrics are scored against)."""
        return any(t.has_answer for s in self.sessions for t in s)

    @property
    def n_turns(self) -> int:
        return sum(len(s) for s in self.sessions)

    def events(
        self, *, ids: str | None = None, timestamps: str | None = None, session_header: str | None = None
    ) -> list[Event]:
        """One event per turn, all sessions flattened in file order (reference §3.1).

        Ids and times are deterministic so that identical re-runs send identical requests and hit the
        response cache. `ids`: "sequential" (`e0000`, ...) or "uuid" (uuid5 of question id and turn index:
        the 36-character shape of the reference's random UUIDs). `timestamps`: 1 ms apart either way;
        "ms" starts on a whole second, "us" on a per-case microsecond fraction, as the reference's
        `CreatedAt + 1 ms + i ms` (Postgres keeps microseconds), so each `created` shows 6 fraction digits.
        "session": sessions sorted by date (stable), each turn at its session's date + 1 ms per turn (kept
        strictly increasing, as the summary boundary and search filters compare timestamps).
        `session_header`: a template with `{date}` put on its own line before the first turn of each session
        (how long_context and summary prompts, which show no timestamps, learn the session dates).
        `ids`/`timestamps` not given: `wire.event_ids`/`wire.timestamps` of configs/config.yaml.
        """
        wire = yaml_defaults("wire")
        ids = wire["event_ids"] if ids is None else ids
        timestamps = wire["timestamps"] if timestamps is None else timestamps
        if ids not in EVENT_ID_STYLES:
            raise ValueError(f"wire.event_ids: {ids!r} is not one of {list(EVENT_ID_STYLES)}")
        if timestamps not in TIMESTAMP_STYLES:
            raise ValueError(f"wire.timestamps: {timestamps!r} is not one of {list(TIMESTAMP_STYLES)}")
        base = BASE_TIMESTAMP + (_micro_fraction(self.question_id) if timestamps == "us" else 0.0)
        order = list(zip(self.session_ids, self.sessions, self.session_dates))
        starts: list[float] = []
        if timestamps == "session" or session_header:
            starts = [self.session_epoch(k) for k in range(len(order))]
        if timestamps == "session":
            ranked = sorted(range(len(order)), key=lambda k: starts[k])
            order, starts = [order[k] for k in ranked], [starts[k] for k in ranked]
        out: list[Event] = []
        i = 0
        last = float("-inf")
        for k, (sid, turns, date) in enumerate(order):
            for j, t in enumerate(turns):
                if timestamps == "session":
                    ts = max(starts[k] + 0.001 * (j + 1), last + 0.001)
                else:
                    ts = base + 0.001 * (i + 1)
                last = ts
                content = t.content
                if session_header and j == 0:
                    content = session_header.format(date=date) + "\n" + content
                out.append(
                    Event(
                        id=str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{self.question_id}/{i}"))
                        if ids == "uuid"
                        else f"e{i:04d}",
                        index=i,
                        role=t.role,
                        content=content,
                        timestamp=ts,
                        author="user" if t.role == "user" else AGENT_AUTHOR,
                        source_session=sid,
                        has_answer=t.has_answer,
                    )
                )
                i += 1
        return out

    def session_epoch(self, k: int) -> float:
        """Seconds since the epoch (UTC) of session k's `haystack_dates` entry; DataError naming it if unusable."""
        return parse_lme_date(
            self.session_dates[k] if k < len(self.session_dates) else "",
            f"question_id={self.question_id}: field 'haystack_dates[{k}]'",
        )


def parse_lme_date(text: str, where: str) -> float:
    """A LongMemEval date ("2023/05/20 (Sat) 02:21") as UTC epoch seconds; DataError naming `where` otherwise."""
    from datetime import datetime

    try:
        return datetime.strptime(text.strip(), LME_DATE_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise DataError(
            f"{where} is {text!r}, expected a date like '2023/05/20 (Sat) 02:21' "
            f"(dated events need the benchmark's dates)"
        ) from None


def _micro_fraction(question_id: str) -> float:
    """A per-case sub-millisecond offset (seconds) whose microsecond digits are never all zero."""
    micros = int(hashlib.sha256(question_id.encode()).hexdigest()[:8], 16) % 1_000_000
    if micros % 1000 == 0:
        micros += 1
    return micros / 1_000_000


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_json_bytes(path: Path) -> bytes:
    """The uncompressed JSON bytes of `path` (gzip detected by magic number, not by name)."""
    if not path.exists():
        raise DataError(f"{path}: dataset file not found")
    if not path.is_file():
        raise DataError(f"{path}: not a file (a dataset is one .json or .json.gz file)")
    with path.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        try:  # streamed: gzip.decompress(whole file) peaks well above the output's size
            with gzip.open(path, "rb") as gz:
                return gz.read()
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(f"{path}: corrupt gzip data ({e})") from e
    return path.read_bytes()


def _answer_text(value: Any) -> str:
    # The reference keeps non-string answers as their raw JSON text (e.g. 3 → "3").
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


MAX_REPORTED_PROBLEMS = 10  # a file with thousands of bad rows is reported by its first problems and a count
_OPTIONAL_STR_LISTS = ("haystack_session_ids", "haystack_dates", "answer_session_ids")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check_row(row: dict[str, Any], problem: Any) -> None:
    """Report every schema problem of one question through `problem(field, message)` (the whole schema:
    required and optional fields, every turn), so one load names all that is wrong, not the first thing."""
    for name, typ in REQUIRED_FIELDS.items():
        if name not in row:
            problem(None, f"missing field '{name}'")
        elif not isinstance(row[name], typ):
            problem(name, f"has type {_type_name(row[name])}")
    for name in ("question_id", "question_type"):
        if isinstance(row.get(name), str) and not row[name].strip():
            problem(name, "is empty")
    if row.get("question_date") is not None and not isinstance(row["question_date"], str):
        problem("question_date", f"has type {_type_name(row['question_date'])}, expected a string")
    for name in _OPTIONAL_STR_LISTS:
        value = row.get(name)
        if value is None:
            continue
        if not isinstance(value, list):
            problem(name, f"has type {_type_name(value)}, expected a list of strings")
            continue
        for i, item in enumerate(value):
            if not isinstance(item, str):
                problem(f"{name}[{i}]", f"has type {_type_name(item)}, expected a string")
                break  # one per field: a list of 500 numbers is one mistake
    sessions = row.get("haystack_sessions")
    if not isinstance(sessions, list):
        return
    for si, sess in enumerate(sessions):
        if not isinstance(sess, list):
            problem(f"haystack_sessions[{si}]", "is not a list")
            continue
        for ti, t in enumerate(sess):
            f = f"haystack_sessions[{si}][{ti}]"
            if not isinstance(t, dict) or not isinstance(t.get("role"), str) or not isinstance(t.get("content"), str):
                problem(f, "needs string 'role' and 'content'")
                continue
            if t["role"] not in ("user", "assistant"):
                problem(f"{f}.role", f"is {t['role']!r}, expected 'user' or 'assistant'")
            if "has_answer" in t and not isinstance(t["has_answer"], bool) and t["has_answer"] is not None:
                problem(f"{f}.has_answer", f"has type {_type_name(t['has_answer'])}, expected true/false")
    if all(isinstance(sess, list) and not sess for sess in sessions):  # every memory mode needs turns to hold
        problem("haystack_sessions", "has no turns (an empty haystack: nothing to remember or summarize)")
    n = len(sessions)
    for name in ("haystack_session_ids", "haystack_dates"):
        value = row.get(name)
        if isinstance(value, list) and value and len(value) != n:
            problem(name, f"has {len(value)} entries for {n} haystack_sessions")


def _build_case(row: dict[str, Any]) -> Case:
    """A Case from a row `_check_row` found no problem in."""
    sessions = tuple(
        tuple(Turn(t["role"], t["content"], bool(t.get("has_answer") or False)) for t in sess)
        for sess in row["haystack_sessions"]
    )
    n = len(sessions)
    return Case(
        question_id=row["question_id"],
        question_type=row["question_type"].strip(),
        question=row["question"],
        answer=_answer_text(row["answer"]),
        question_date=row.get("question_date") or "",
        sessions=sessions,
        session_ids=tuple(row.get("haystack_session_ids") or [f"s{i}" for i in range(n)]),
        session_dates=tuple(row.get("haystack_dates") or [""] * n),
        answer_session_ids=tuple(row.get("answer_session_ids") or ()),
    )


def parse_case(row: Any, where: str) -> Case:
    """One question; DataError listing its schema problems (see `parse_cases` for a whole file)."""
    problems: list[str] = []
    case = _parse_row(row, where, problems)
    if problems:
        raise DataError(_problems_message(where, problems))
    assert case is not None
    return case


def _parse_row(row: Any, where: str, problems: list[str]) -> Case | None:
    if not isinstance(row, dict):
        problems.append(f"{where}: expected a JSON object, got {_type_name(row)}")
        return None
    qid = row.get("question_id", "?")
    before = len(problems)

    def problem(field: str | None, message: str) -> None:
        problems.append(f"{where} (question_id={qid}): " + (f"field '{field}' {message}" if field else message))

    _check_row(row, problem)
    return _build_case(row) if len(problems) == before else None


def _problems_message(source: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    shown = "; ".join(problems[:MAX_REPORTED_PROBLEMS])
    more = f"; ... and {len(problems) - MAX_REPORTED_PROBLEMS} more" if len(problems) > MAX_REPORTED_PROBLEMS else ""
    return f"{source}: {len(problems)} schema problems: {shown}{more}"


def parse_cases(data: bytes, source: str) -> list[Case]:
    """Every question of a file, validated once up front: DataError naming the file, each bad record
    (index and question_id) and field, all problems collected (the first MAX_REPORTED_PROBLEMS shown)."""
    # Element by element where it can (harness/data/jsonarray.py: the whole file as one str costs up to 4×
    # its size); otherwise whole, for the exact error.
    rows = array_of_objects(data) if isinstance(data, (bytes, bytearray)) else None
    if rows is None:
        try:
            rows = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"{source}: invalid JSON ({e})") from e
        except ValueError as e:  # e.g. an integer past Python's 4300-digit conversion limit
            raise DataError(f"{source}: unsupported JSON ({e})") from None
        except RecursionError:
            raise DataError(f"{source}: unsupported JSON (nested too deeply to parse)") from None
    if not isinstance(rows, list):
        raise DataError(f"{source}: expected a JSON array of questions, got {type(rows).__name__}")
    problems: list[str] = []
    cases: list[Case] = []
    first_index: dict[str, int] = {}
    for i, r in enumerate(rows):
        case = _parse_row(r, f"{source}[{i}]", problems)
        if case is None:
            continue
        # A later duplicate would silently replace the earlier one's records (they are keyed by question_id).
        if case.question_id in first_index:
            problems.append(
                f"{source}[{i}] (question_id={case.question_id}): duplicate question_id "
                f"(first at [{first_index[case.question_id]}])"
            )
        else:
            first_index[case.question_id] = i
        cases.append(case)
    if problems:
        raise DataError(_problems_message(source, problems))
    return cases


def select(
    cases: Iterable[Case],
    question_types: Sequence[str] | None = None,
    limit: int | None = None,
    question_ids: Sequence[str] | None = None,
    sample_seed: int | None = None,
    shortest: bool | None = None,
    per_type: int | None = None,
    max_history_chars: int | None = None,
) -> list[Case]:
    """Filter by type (case-insensitive), ids and `max_history_chars` (the history's characters, `history_chars`),
    stable-sort by question_id, then keep `limit` cases: the first ones (reference §2), or with `sample_seed` a
    seeded random sample, drawn per question type in proportion to its share (the first N of a sorted file are not a
    representative subset), or with `shortest` the N cases whose history is shortest (a job sized by its prompt
    tokens). `per_type` instead of `limit` keeps that many of every question type present, chosen the same three
    ways (a proportional draw of a few cases can leave a small type out). Returned sorted by question_id."""
    if shortest not in (None, True, False):
        raise DataError(f"dataset.shortest must be true, false or null, got {shortest!r}")
    if shortest and sample_seed is not None:
        raise DataError("dataset.shortest and dataset.sample_seed both choose the cases: set only one")
    if per_type is not None and limit is not None:
        raise DataError("dataset.per_type and dataset.limit both size the selection: set only one")
    for key, value in (("per_type", per_type), ("max_history_chars", max_history_chars)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise DataError(f"dataset.{key} must be a whole number >= 1 or null, got {value!r}")
    out = list(cases)
    if question_types:
        wanted = {t.strip().lower() for t in question_types}
        out = [c for c in out if c.question_type.lower() in wanted]
    if question_ids:
        ids = set(question_ids)
        out = [c for c in out if c.question_id in ids]
    if max_history_chars is not None:
        out = [c for c in out if history_chars(c) <= max_history_chars]
    out.sort(key=lambda c: c.question_id)
    if per_type is not None:
        return _per_type(out, per_type, sample_seed, bool(shortest))
    if limit is not None:
        if limit < 0:
            raise DataError(f"limit must be >= 0, got {limit}")
        if shortest:  # stable sort: equal lengths keep question_id order
            out = sorted(sorted(out, key=history_chars)[:limit], key=lambda c: c.question_id)
        else:
            out = out[:limit] if sample_seed is None else _stratified_sample(out, limit, sample_seed)
    return out


def _per_type(cases: list[Case], k: int, seed: int | None, shortest: bool) -> list[Case]:
    """k cases of each question type (all of a type with fewer): the first k by id, the k shortest histories, or a
    draw seeded by `seed` and the type's name (adding a type to the file does not change another type's draw)."""
    import random

    picked: list[Case] = []
    for qtype, group in sorted(_by_type(cases).items()):  # each group in question_id order
        if shortest:
            picked += sorted(group, key=history_chars)[:k]
        elif seed is not None:
            picked += random.Random(f"{seed}:{qtype}").sample(group, min(k, len(group)))
        else:
            picked += group[:k]
    return sorted(picked, key=lambda c: c.question_id)


def _by_type(cases: list[Case]) -> dict[str, list[Case]]:
    """The cases of each question type, in the order given."""
    by_type: dict[str, list[Case]] = {}
    for c in cases:
        by_type.setdefault(c.question_type, []).append(c)
    return by_type


def history_chars(case: Case) -> int:
    """Characters of all the history's turns: what the long-context prompt and the summary request grow with."""
    return sum(len(t.content) for s in case.sessions for t in s)


def _stratified_sample(cases: list[Case], n: int, seed: int) -> list[Case]:
    """n cases, each question type getting round(n × its share) (largest remainders fill the rest)."""
    import random

    if n >= len(cases):
        return cases
    rng = random.Random(seed)
    by_type = _by_type(cases)
    quotas = {t: n * len(cs) / len(cases) for t, cs in by_type.items()}
    take = {t: int(q) for t, q in quotas.items()}
    for t in sorted(quotas, key=lambda t: (-(quotas[t] - take[t]), t))[: n - sum(take.values())]:
        take[t] += 1
    picked = [c for t in sorted(by_type) for c in rng.sample(by_type[t], take[t])]
    return sorted(picked, key=lambda c: c.question_id)


def default_data_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("LME_DATA_DIR"):
        dirs.append(Path(os.environ["LME_DATA_DIR"]))
    dirs += [REPO_ROOT.parent / "shared" / "data" / "longmemeval", REPO_ROOT / "data" / "longmemeval"]
    return dirs


def find_local(filename: str, search_dirs: Sequence[str | Path] | None = None) -> Path | None:
    for d in list(search_dirs or []) + default_data_dirs():
        p = Path(d).expanduser() / filename
        if p.exists():
            return p
    return None


@dataclass
class LongMemEvalSource:
    """A dataset config (Hydra `dataset=` group): where the file is, how to verify and filter it.

    Resolution order: explicit `path`; `filename` in the search dirs (`$LME_DATA_DIR`,
    `../shared/data/longmemeval/` next to the repo); the Hugging Face hub (`hf_repo`/`hf_filename`
    at `hf_revision`), downloaded raw so non-string answers keep their JSON text.
    """

    name: str = "longmemeval"
    path: str | None = None
    filename: str | None = None
    search_dirs: Sequence[str] = ()
    sha256: str | None = None
    question_types: Sequence[str] | None = ("single-session-user",)
    question_ids: Sequence[str] | None = None
    limit: int | None = None
    sample_seed: int | None = None  # with limit: a seeded random subset (stratified by type) instead of the first N
    shortest: bool | None = None  # with limit: the N cases with the shortest history instead of the first N
    per_type: int | None = None  # instead of limit: k cases of every question type (first, shortest or seeded)
    max_history_chars: int | None = None  # only cases whose history has at most this many characters
    shard: str | None = None  # "I/N": the I-th of N disjoint parts of the selection (runs/cluster: docs/cluster.md)
    hf_repo: str | None = "xiaowu0162/longmemeval-cleaned"
    hf_filename: str | None = None
    hf_revision: str = "main"
    hf_sha256: str | None = None
    hf_endpoint: str | None = None  # a hub mirror; None: $HF_ENDPOINT or huggingface.co

    def resolve(self) -> tuple[str, bytes, str | None]:
        """(source description, uncompressed bytes, expected sha256)."""
        if self.path:
            p = Path(self.path).expanduser()
            return str(p), read_json_bytes(p), self.sha256
        if self.filename:
            found = find_local(self.filename, self.search_dirs)
            if found is not None:
                return str(found), read_json_bytes(found), self.sha256
        if self.hf_repo and self.hf_filename:
            p, commit = _hf_download(self.hf_repo, self.hf_filename, self.hf_revision, self.hf_endpoint)
            # The resolved commit, not the branch name, is what makes the source reproducible.
            return f"hf://{self.hf_repo}@{commit}/{self.hf_filename}", read_json_bytes(p), self.hf_sha256
        raise DataError(
            f"dataset '{self.name}': no file found (path={self.path!r}, filename={self.filename!r} in "
            f"{[str(d) for d in list(self.search_dirs) + default_data_dirs()]}) and no hub source configured"
        )

    def load(self) -> tuple[list[Case], dict[str, Any]]:
        """The selected cases and provenance (source, sha256, counts)."""
        source, data, expected = self.resolve()
        digest = sha256_bytes(data)
        if expected and digest != expected:
            raise DataError(f"{source}: sha256 mismatch: expected {expected}, got {digest}")
        all_cases = parse_cases(data, source)
        del data  # the file's bytes are not needed past here
        present = {c.question_type.lower() for c in all_cases}
        missing = [t for t in (self.question_types or []) if t.strip().lower() not in present]
        if missing:  # a typo would otherwise silently shrink the run to the other types
            raise DataError(
                f"{source}: dataset '{self.name}' question_types {missing} match no question "
                f"(types in the file: {sorted(present)})"
            )
        cases = select(
            all_cases,
            self.question_types,
            self.limit,
            self.question_ids,
            self.sample_seed,
            self.shortest,
            self.per_type,
            self.max_history_chars,
        )
        if not cases:
            cap = f" and max_history_chars={self.max_history_chars}" if self.max_history_chars is not None else ""
            raise DataError(f"{source}: no question matches question_types={list(self.question_types or [])}{cap}")
        prov = {
            "source": source,
            "sha256": digest,
            "verified": bool(expected),
            "n_total": len(all_cases),
            "n_selected": len(cases),
        }
        if self.shard is not None:
            index, count = parse_shard(self.shard)
            cases = shard_cases(cases, index, count)
            prov.update({"shard": f"{index}/{count}", "n_shard": len(cases)})
        return cases, prov


def parse_shard(value: Any) -> tuple[int, int]:
    """ "I/N" -> (I, N) with 0 <= I < N; DataError naming dataset.shard otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(value))
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise DataError(f"dataset.shard={value!r}: expected I/N with 0 <= I < N (e.g. dataset.shard=0/4)")
    return int(m.group(1)), int(m.group(2))


def shard_cases(cases: Sequence[Case], index: int, count: int) -> list[Case]:
    """Every count-th case of the (question_id-sorted) selection from `index`: disjoint, together the whole
    selection, balanced within one case, and independent of which machine runs it."""
    return [c for i, c in enumerate(cases) if i % count == index]


def _hf_download(repo: str, filename: str, revision: str, endpoint: str | None = None) -> tuple[Path, str]:
    """(local path of the downloaded file, the commit it was resolved to)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as e:  # pragma: no cover - datasets depends on huggingface_hub
        raise DataError(f"hf://{repo}/{filename}: huggingface_hub is not installed") from e
    where = f"hf://{repo}@{revision}/{filename}" + (f" via {endpoint}" if endpoint else "")
    try:
        path = Path(
            hf_hub_download(repo_id=repo, filename=filename, revision=revision, repo_type="dataset", endpoint=endpoint)
        )
    except Exception as e:  # network errors come in many types; all mean "not reachable"
        raise DataError(f"{where}: download failed ({type(e).__name__}: {e})") from e
    # The hub cache lays files out as .../snapshots/<commit>/<filename>.
    snapshot = path.parents[len(Path(filename).parts) - 1]
    commit = snapshot.name if snapshot.parent.name == "snapshots" else revision
    return path, commit


def info(path: str | Path) -> dict[str, Any]:
    """Facts about a dataset file (the `lme-harness data info` command)."""
    p = Path(path)
    data = read_json_bytes(p)
    cases = parse_cases(data, str(p))
    types: dict[str, int] = {}
    for c in cases:
        types[c.question_type] = types.get(c.question_type, 0) + 1
    return {
        "path": str(p),
        "questions": len(cases),
        "question_types": dict(sorted(types.items())),
        "abstention": sum(c.is_abstention for c in cases),
        "with_evidence_label": sum(c.has_evidence_label for c in cases),
        "turns_mean": round(sum(c.n_turns for c in cases) / max(len(cases), 1), 1),
        "sha256": sha256_bytes(data),
        "bytes_uncompressed": len(data),
    }
