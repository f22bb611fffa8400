"""Issue 39 item 4: a user's own prompts, experiments, scorers and memory providers from a config directory of their
own (`--config-dir`, `hydra.searchpath`), for run, plan and rescore; and memory providers an installed package
registers through the entry-point group `lme_harness.memory_providers` (docs/extending.md)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore

from commands.cli import main
from harness.records import load_records
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from runners.extensions import ENTRY_POINT_GROUP, config_dir_options, provider_config
from tests.support.fake_run import fake_endpoint_args

# A memory provider of the user's own: a module outside the package, on the user's path.
PROVIDER = '''
from harness.memory.provider import Capabilities, Ingest, MemoryItem, ProviderBase, Retrieval


class NotesProvider(ProviderBase):
    """Keeps each unit's user turns; retrieve hands back the last `keep` of them, marked."""

    def __init__(self, keep: int = 5, marker: str = "NOTE") -> None:
        self.keep, self.marker, self.units = keep, marker, {{}}

    def capabilities(self):
        return Capabilities(name="{name}", version="1")

    def setup(self, unit):
        self.units[unit] = []

    def ingest(self, unit, sessions):
        self.units[unit] += [t.content for s in sessions for t in s.turns if t.role == "user"]
        return Ingest()

    def retrieve(self, unit, query, top_k, as_of):
        kept = self.units[unit][-min(self.keep, top_k):]
        return Retrieval(tuple(MemoryItem(f"{{self.marker}}: {{text}}") for text in kept))

    def teardown(self, unit):
        self.units.pop(unit, None)
'''

PROMPT = """\
_target_: harness.session.summary.SummaryPrompt
name: terse
user_template: |-
  TERSE-PROMPT: list what the user said.

  <conversation>
  {conversation_text}
  </conversation>
system_template: null
max_summary_words: 0
post_hook: null
"""

EXPERIMENT = """\
# @package _global_
defaults:
  - override /prompt: terse
  - override /memory: notes
  - override /mode: [summary, memory]
run:
  name: mine
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """The user's provider module `my_memory` on sys.path (as a package of theirs would be)."""
    code = tmp_path / "code"
    write(code, {"my_memory.py": PROVIDER.format(name="notes")})
    monkeypatch.syspath_prepend(str(code))
    yield "my_memory"
    sys.modules.pop("my_memory", None)


@pytest.fixture
def user_dir(tmp_path, user_module):
    return write(
        tmp_path / "my-configs",
        {
            "prompt/terse.yaml": PROMPT,
            "memory/notes.yaml": f"_target_: {user_module}.NotesProvider\nkeep: 3\nmarker: MY-NOTE\n",
            "experiment/mine.yaml": EXPERIMENT,
            "scorers/exact.yaml": "lexical:\n  _target_: harness.scoring.lexical.LexicalScorer\n",
        },
    )


def fake_args(srv, tmp_path, run_dir: Path) -> list[str]:
    return [f"hydra.run.dir={run_dir}", *fake_endpoint_args(srv.base_url, tmp_path), "dataset.limit=1", "judge=none"]


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["--config-dir", "hydra.searchpath"])
def test_a_config_dir_of_ones_own_runs_plans_and_rescores_end_to_end(tmp_path, user_dir, how, capsys):
    given = ["--config-dir", str(user_dir)] if how == "--config-dir" else [f"hydra.searchpath=[file://{user_dir}]"]
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(["run", *given, "+experiment=mine", *fake_args(srv, tmp_path, run_dir)]) == 0
        requests = list(srv.requests)
        # the plan of the same command composes the same config from the same directory, and sends nothing
        plan_out = tmp_path / "plan.json"
        code = main(
            ["plan", *given, "+experiment=mine", *fake_args(srv, tmp_path, tmp_path / "p"), "--out", str(plan_out)]
        )
        assert code == 0 and len(srv.requests) == len(requests)
        # rescore with the user's own scorers: --config-dir anywhere, before the source directory too
        rescored = tmp_path / "rescored"
        first = ["--config-dir", str(user_dir), str(run_dir)] if how == "--config-dir" else [str(run_dir), *given]
        code = main(["rescore", *first, "scorers=exact", "judge=none", f"hydra.run.dir={rescored}"])
        assert code == 0
    records = load_records(run_dir / "records.jsonl")
    assert {r["mode"] for r in records} == {"summary", "memory"} and all(r["status"] == "ok" for r in records)
    sent = [json.dumps(r.get("messages")) for r in requests]
    assert any("TERSE-PROMPT" in m for m in sent)  # the user's summary prompt
    assert any("MY-NOTE:" in m for m in sent)  # the user's provider, with the settings of the user's memory config
    assert json.loads(plan_out.read_text())["modes"] == ["summary", "memory"]
    rescored_records = load_records(rescored / "records.jsonl")
    assert len(rescored_records) == len(records) and all(r["rescored_from"] == str(run_dir) for r in rescored_records)
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["config"]["memory"]["_target_"] == "my_memory.NotesProvider"  # recorded as given


@pytest.mark.e2e
def test_a_file_with_an_installed_configs_name_is_refused_before_anything(tmp_path, capsys):
    user = write(tmp_path / "mine", {"prompt/fact_keeper.yaml": PROMPT, "prompt/terse.yaml": PROMPT})
    unreachable = ["model=endpoint", "model.base_url=http://127.0.0.1:9/v1", "model.model=m"]
    code = main(
        ["run", "--config-dir", str(user), "prompt=fact_keeper", f"hydra.run.dir={tmp_path / 'run'}", *unreachable]
    )
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "run").exists()
    (line,) = [line for line in err.splitlines() if line.startswith("lme-harness: error:")]
    assert str(user / "prompt" / "fact_keeper.yaml") in line and "rename it" in line and "terse" not in line


@pytest.mark.e2e
def test_a_missing_config_dir_is_named(tmp_path, capsys):
    code = main(["plan", f"hydra.searchpath=[file://{tmp_path / 'nowhere'}]", f"hydra.run.dir={tmp_path / 'run'}"])
    assert code == 2 and f"config directory {tmp_path / 'nowhere'} does not exist" in capsys.readouterr().err


@pytest.mark.e2e
def test_a_config_dir_option_without_a_directory_is_named(tmp_path, capsys):
    assert main(["plan", f"hydra.run.dir={tmp_path / 'run'}", "--config-dir"]) == 2
    assert "lme-harness: error: --config-dir needs a directory" in capsys.readouterr().err


def test_config_dir_options_are_taken_anywhere():
    rest, opts = config_dir_options(["a=1", "-cd", "x", "SRC", "--config-dir=/y", "b=2"])
    assert rest == ["a=1", "SRC", "b=2"]
    assert opts == ["--config-dir", str(Path("x").absolute()), "--config-dir", "/y"]


# ---- a provider registered by an installed package (an entry point) -----------------------------------------


def install(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A package installed into `site`: its modules and a dist-info whose entry_points.txt importlib.metadata reads."""
    write(site, modules)
    info = site / f"{dist}-0.1.dist-info"
    lines = "\n".join(f"{name} = {value}" for name, value in entry_points.items())
    write(
        info,
        {
            "METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n",
            "entry_points.txt": f"[{ENTRY_POINT_GROUP}]\n{lines}\n",
        },
    )


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    repo = ConfigStore.instance().repo
    before = dict(repo.get("memory", {}))
    yield site
    repo["memory"] = before  # the process-wide config store as it was
    for name in ("acme_memory", "broken_memory"):
        sys.modules.pop(name, None)


@pytest.mark.e2e
def test_a_provider_registered_by_an_installed_package_is_selected_by_name(tmp_path, site, capsys):
    install(
        site,
        "acme-memory",
        {"acme": "acme_memory:NotesProvider", "acme_cfg": "acme_memory:CONFIG", "bm25": "acme_memory:NotesProvider"},
        {
            "acme_memory.py": PROVIDER.format(name="acme")
            + "\nCONFIG = {'_target_': 'acme_memory.NotesProvider', 'marker': 'CFG-NOTE'}\n"
        },
    )
    with FakeOpenAIServer(FakeModel()) as srv:
        code = main(
            ["run", "mode=memory", "memory=acme", "memory.marker=ACME-NOTE", *fake_args(srv, tmp_path, tmp_path / "a")]
        )
        assert code == 0
        assert any("ACME-NOTE:" in json.dumps(r.get("messages")) for r in srv.requests)  # its own argument, overridden
        srv.requests.clear()
        assert main(["run", "mode=memory", "memory=acme_cfg", *fake_args(srv, tmp_path, tmp_path / "b")]) == 0
        assert any("CFG-NOTE:" in json.dumps(r.get("messages")) for r in srv.requests)  # a config entry point
    records = load_records(tmp_path / "a" / "records.jsonl")
    assert records and all(r["status"] == "ok" and r["mode"] == "memory" for r in records)
    assert json.loads((tmp_path / "a" / "run.json").read_text())["config"]["memory"] == {
        "_target_": "acme_memory.NotesProvider",
        "keep": 5,
        "marker": "ACME-NOTE",
    }
    err = capsys.readouterr().err
    # the entry point with an installed provider's name is not used, and says so
    assert "memory provider 'bm25' of acme-memory" in err and "installed provider has that name" in err


@pytest.mark.e2e
def test_a_broken_entry_point_is_named_and_the_others_still_run(tmp_path, site, capsys):
    install(site, "broken-memory", {"broken": "broken_memory:Missing"}, {"broken_memory.py": "X = 1\n"})
    with FakeOpenAIServer(FakeModel()) as srv:
        assert main(["run", "mode=memory", "memory=bm25", *fake_args(srv, tmp_path, tmp_path / "a")]) == 0
        assert main(["run", "mode=memory", "memory=broken", *fake_args(srv, tmp_path, tmp_path / "b")]) != 0
    err = capsys.readouterr().err
    assert "lme-harness: warning: memory provider 'broken' of broken-memory (entry point broken_memory:Missing)" in err


def test_provider_config_of_a_class_lists_its_plain_arguments():
    class P:
        def __init__(self, url: str, top: int = 3, names: tuple = (), *, scale: float = 1.5, **extra) -> None: ...

    node = provider_config(P, "p")
    assert node == {"_target_": f"{P.__module__}.{P.__qualname__}", "url": "???", "top": 3, "scale": 1.5}
    with pytest.raises(ValueError, match="needs a `_target_`"):
        provider_config({"keep": 1}, "p")
    with pytest.raises(ValueError, match="expected a provider class"):
        provider_config(42, "p")


@pytest.mark.parametrize("seed", range(8))
def test_exactly_the_files_named_like_installed_configs_are_refused(tmp_path, seed):
    """Generated folders of the user's: installed names (any group, nested ones included) among new ones."""
    from harness.config_files import CONFIG_DIR
    from runners.extensions import config_dir_problems

    rng = random.Random(seed)
    installed = sorted(p.relative_to(CONFIG_DIR).as_posix() for p in CONFIG_DIR.rglob("*.yaml"))
    taken = rng.sample(installed, rng.randrange(0, 4))
    groups = sorted({name.rsplit("/", 1)[0] for name in installed if "/" in name} | {"mygroup"})
    new = [f"{rng.choice(groups)}/mine_{i}.yaml" for i in range(rng.randrange(1, 5))]
    user = write(tmp_path / "user", {name: "a: 1\n" for name in taken + new})
    problems = config_dir_problems([str(user)])
    assert sorted(p.split(" has the name")[0] for p in problems) == sorted(str(user / name) for name in taken)
