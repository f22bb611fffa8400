"""dataset.shard=I/N splits a run into disjoint parts; `lme-harness merge` makes one run of them whose
records equal the serial run's."""

import pytest

from commands.cli import main
from harness.data.longmemeval import DataError, parse_shard, shard_cases
from harness.testing.fake_openai import FakeOpenAIServer
from harness.testing.faults import FakeModel
from tests.support.tagged_run import MODES, N_CASES, answer, args, dataset, stable_records


def test_shards_are_disjoint_and_together_the_whole_selection():
    cases = list(range(11))
    parts = [shard_cases(cases, i, 3) for i in range(3)]
    assert sorted(sum(parts, [])) == cases and sum(map(len, parts)) == len(cases)
    assert [len(p) for p in parts] == [4, 4, 3]
    assert parse_shard("1/3") == (1, 3) and parse_shard(" 0 / 1 ") == (0, 1)
    for bad in ("3/3", "1", "a/b", "0/0", "-1/2"):
        with pytest.raises(DataError, match=r"dataset.shard=.*expected I/N"):
            parse_shard(bad)


@pytest.mark.e2e
def test_shard_runs_merged_equal_the_serial_run_and_merge_refuses_bad_inputs(tmp_path, capsys):
    data = dataset(tmp_path)
    with FakeOpenAIServer(FakeModel(answer=answer)) as srv:
        base = lambda name: args(tmp_path, srv.base_url, data, name) + ["judge=none"]  # noqa: E731
        assert main(base("serial")) == 0
        assert main(base("s0") + ["dataset.shard=0/2"]) == 0
        assert main(base("s1") + ["dataset.shard=1/2"]) == 0
        capsys.readouterr()
        assert main(["merge", str(tmp_path / "merged"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
        assert "# " in capsys.readouterr().out  # the merged run's report
        assert main(base("other") + ["dataset.shard=1/2", "generation.max_tokens=7"]) == 0
    serial = stable_records(tmp_path / "serial")
    assert len(serial) == N_CASES * len(MODES)
    assert set(stable_records(tmp_path / "s0")).isdisjoint(stable_records(tmp_path / "s1"))
    assert stable_records(tmp_path / "merged") == serial
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "m2"), str(tmp_path / "s0")]) == 2
    assert "shards ['1/2'] are missing" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "m3"), str(tmp_path / "s0"), str(tmp_path / "other")]) == 2
    assert f"{tmp_path / 'other'}: its configuration differs" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "m4"), str(tmp_path / "s0"), str(tmp_path / "s0"), str(tmp_path / "s1")]) == 2
    assert "shards must be disjoint" in capsys.readouterr().err
    assert not (tmp_path / "m2").exists() and not (tmp_path / "m3").exists() and not (tmp_path / "m4").exists()
