"""The replica check inside a side, torchrun's failure report, the ranks' command lines and the
world-size hint, without launching anything."""

from __future__ import annotations

from pathlib import Path

from tuimon.engine.judge.fingerprints import env_diff
from tuimon.engine.judge.hints import likely_causes
from tuimon.engine.launch.ranks import failed_rank, rewrap
from tuimon.engine.runs.plan import PairPlan, default_threads
from tuimon.engine.sources.replicas import ReplicaWatch, SideReplicas, replica_lines, saved_watch
from tuimon.steplog import Step


def step(k: int, digest: str | None = "d", **tensors: str) -> Step:
    return Step(k, {"loss": 1.0}, digest=None if digest is None else f"{digest}{k}",
                digests=tensors)  # fmt: skip


def test_equal_replicas_then_one_parts_and_is_named_once() -> None:
    check = SideReplicas("a", 3)
    assert check.rank0([step(k, W=f"w{k}") for k in range(4)]) == []
    assert check.rank(1, [step(k, W=f"w{k}") for k in range(4)]) == []
    found = check.rank(2, [step(0, W="w0"), step(1, "x", W="v1", b="b1"), step(2, "x")])
    assert [p.text() for p in found] == ["side a: rank 2 parted from rank 0 at step 1 (W, b)"]
    assert check.rank(2, [step(3, "x")]) == []  # said once
    assert check.to_dict()["parted"] == {"rank": 2, "step": 1, "tensors": ["W", "b"]}
    assert check.lag() == "rank 0 at step 3, rank 1 at step 3, rank 2 at step 3"


def test_records_are_compared_in_order_whichever_comes_first_and_repeats_kept() -> None:
    check = SideReplicas("b", 2)
    assert check.rank(1, [step(0), step(1), step(1)]) == []  # rank 1 ahead of rank 0
    assert check.rank0([step(0), step(1)]) == []
    found = check.rank0([step(1, "z")])  # the repeat of step 1 differs
    assert [(p.rank, p.step) for p in found] == [(1, 1)]
    assert not check.leader  # nothing held once every rank compared it


def test_ranks_without_digests_are_not_checked_and_say_so(tmp_path: Path) -> None:
    watch = ReplicaWatch(tmp_path, [2, None])
    (tmp_path / "a.rank1.jsonl").write_text('{"step": 0, "loss": 1}\n')
    watch.feed("a", [step(0, None)])
    watch.poll(final=True)
    assert watch.to_dict()["a"]["note"].startswith("not checked: the ranks log no parameter")
    assert "b" not in watch.to_dict()


def test_a_rank_file_followed_as_it_grows_with_a_cut_last_line(tmp_path: Path) -> None:
    log = tmp_path / "a.rank1.jsonl"
    watch = ReplicaWatch(tmp_path, [2, 2])
    assert watch.poll() == []  # not there yet: nothing, no error
    watch.feed("a", [step(0), step(1)])
    log.write_text('{"step": 0, "param_digest": "d0"}\n{"step": 1, "param_dig')
    assert watch.poll() == []
    with log.open("a") as fh:
        fh.write('est": "x1"}\n')
    watch.poll()  # the reader may hold a step back until the next line (rows of one step merge)
    found = watch.poll(final=True)  # the end: everything read
    assert watch.told == {("a", 1)} and found in (
        [],
        ["side a: rank 1 parted from rank 0 at step 1"],
    )
    assert watch.to_dict()["a"]["parted"] == {"rank": 1, "step": 1, "tensors": []}
    assert "no such file" in watch.to_dict()["b"]["note"]


def test_no_watch_without_ranks_and_saved_values_of_the_wrong_type() -> None:
    assert not ReplicaWatch(None, [None, 1])
    assert saved_watch(Path("."), [2, 2], None) is not None
    for bad in (None, "2", [2], [True, "x"], [0, -1]):
        assert saved_watch(Path("."), bad, None) is None
    assert replica_lines({"a": "x", "b": {"parted": {"step": "5"}, "ranks": 2}}) == [
        "side b: 2 ranks, replicas equal to rank 0 (None steps compared)"
    ]
    assert replica_lines([1]) == []


REPORT = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 8002)  (SIGTERM)
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_17:18:19
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 8003)
======================================================
"""


def test_the_failed_rank_read_from_torchruns_report() -> None:
    assert failed_rank(REPORT.replace("{code}", "3")) == "rank 1 exited with code 3"
    assert failed_rank(REPORT.replace("{code}", "-9")) == "rank 1 was killed by SIGKILL"
    assert failed_rank("Traceback ...\nValueError: x") is None


def test_a_side_of_ranks_and_its_rerun_command(tmp_path: Path) -> None:
    plan = PairPlan(seed=0, devices=("cpu", "cpu"), threads=(1, 1), deterministic=False,
                    loss_dtype=None, template=("python", "t.py"), nproc=(None, 2))  # fmt: skip
    assert plan.spec("a", tmp_path).argv == ("python", "t.py")
    argv = plan.spec("b", tmp_path).argv
    assert argv[1:7] == ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                         "--no-python")  # fmt: skip
    assert argv[-5:] == ("tuimon-rank", str(tmp_path), "b", "python", "t.py")
    assert plan.shown(plan.spec("b", tmp_path), tmp_path) == "2 ranks · python t.py"
    again = rewrap(argv, "b", tmp_path / "explain", 4)
    assert again[again.index("--nproc-per-node") + 1] == "4"
    assert again[-4] == str(tmp_path / "explain")
    wrapped = rewrap(["python", "t.py"], "a", tmp_path, 3)
    assert wrapped[wrapped.index("--nproc-per-node") + 1] == "3" and "tuimon-rank" in wrapped
    assert rewrap(["python", "t.py"], "a", tmp_path) == ["python", "t.py"]
    assert default_threads(["cpu", "cpu"], [1, 3]) == max(1, default_threads(["cpu"]) // 4)


def test_the_world_size_hint() -> None:
    a = {"device": "cpu", "threads": 1, "world_size": 1}
    b = {**a, "world_size": 2}
    doc = {"devices": ["cpu", "cpu"], "runs": {"a": {"env": a}, "b": {"env": b}},
           "env_diff": env_diff(a, b), "summary": {"first_divergent_step": 0}}  # fmt: skip
    (hint,) = [h for h in likely_causes(doc) if h.tag == "world size"]
    assert hint.evidence == "world_size 1 vs 2"
