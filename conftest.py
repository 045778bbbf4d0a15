"""pytest plumbing shared by suite/ and tests/: process group, NVML sampler, environment
fingerprint, rank-0-only output, the results file (written whole, checkpointed), and every
benchmark's deadline (suite/watchdog.py).

Run the suite on one node:  torchrun --nproc-per-node 4 --local-ranks-filter 0 \\
                                -m pytest suite/ --results-json results.json
(`nox -s bench` does this for you.)
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from suite import rank_start

# A rank ends with its launcher: a killed torchrun agent or mpirun takes its ranks along
# instead of leaving them to run the pass to its end (impl/lifetime.py). Armed before the
# imports below (torch's takes seconds), where the pass did not load suite.rank_start first.
rank_start.arm()

from impl.profiles import recorded_profile  # noqa: E402
from impl.settings import check_environment, selected_backend  # noqa: E402
from suite.conftest import launched_world  # noqa: E402
from suite.suite_options import SUITE_OPTIONS, check_suite_options  # noqa: E402


def pytest_addoption(parser):
    group = parser.getgroup("overlap suite")
    # Plain strings: suite.suite_options checks them in pytest_configure, the check suite/run.py
    # makes before it launches, so both refuse a bad value with the same one line.
    for option in SUITE_OPTIONS:
        group.addoption(option.flag, default=option.default, help=option.help)
    group.addoption("--results-json", default=None,
                    help="write the results here (rank 0; written whole, checkpointed after "
                         "every benchmark and marked partial until the run ends)")
    group.addoption("--resume-after", default=None, metavar="NODEID",
                    help="run only what is collected after this benchmark (suite/run.py's "
                         "fresh pass after a hang)")


def _rank() -> int:
    return int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))


def pytest_configure(config):
    try:
        check_environment()
        config.suite_choices = check_suite_options(vars(config.option))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if config.option.resume_after is not None and not config.option.resume_after.strip():
        raise pytest.UsageError("--resume-after: give a benchmark's node id (the launcher "
                                "prints the one a hang stopped at)")
    config.suite_rank = _rank()
    if launched_world() > 1 and not config.option.collectonly:  # not suite/run.py's check
        # Ctrl-C ends a rank at once, as SIGTERM does. pytest's KeyboardInterrupt would run
        # the teardown barriers while other ranks are dead or inside a collective (a hang until
        # the process-group timeout), and a rank blocked in a collective would not even see
        # it. Nothing is lost: the results file is checkpointed after every benchmark.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    if config.suite_rank != 0:
        # Only rank 0 reports; the others still run every benchmark (same collectives).
        config.option.benchmark_autosave = False
        config.option.benchmark_save = None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """--resume-after, then every benchmark's deadline and this rank's watchdog."""
    from suite.watchdog import Watchdog, plan_deadlines

    if (resume_after := config.option.resume_after) is not None:
        at = next((i for i, item in enumerate(items) if item.nodeid == resume_after), None)
        if at is None:
            raise pytest.UsageError(f"--resume-after {resume_after}: no such test in this "
                                    "collection")
        config.hook.pytest_deselected(items=items[:at + 1])
        items[:] = items[at + 1:]
    choices = config.suite_choices
    config.suite_deadlines = plan_deadlines(items, config.option.suite_mode,
                                            choices["deadline_multiple"],
                                            choices["deadline_floor_s"])
    if config.suite_deadlines and not config.option.collectonly and config.suite_rank == 0:
        from impl.capabilities import gpu_count
        from suite import budget

        config.suite_timing = budget.PassTiming(
            config.suite_deadlines, gpu_count(), budget.load_rates(),
            say=lambda line: uncaptured(config, line))
    if config.suite_deadlines and not config.option.collectonly:
        capture = config.pluginmanager.getplugin("capturemanager")
        config.suite_watchdog = Watchdog(
            config.suite_rank, launched_world(), config.option.results_json,
            on_stop=lambda records: _write_hang(config, records),
            uncapture=lambda: capture and capture.suspend_global_capture(in_=False),
            say=lambda line: uncaptured(config, line))


def _write_hang(config, records: list[dict]) -> None:
    """Rank 0's watchdog, before the process ends: the results file with what finished and
    the hang (called from the watchdog's thread while the main thread is stuck)."""
    from suite.hangs import backstop_dumps, summary

    dumps = backstop_dumps(config.option.results_json)
    config._suite_hangs = [summary(records, dumps)]
    write_results(config, partial=True)
    keep_elsewhere(config, partial=True)  # the process ends next: no session finish


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    watchdog = getattr(item.config, "suite_watchdog", None)
    deadline = getattr(item.config, "suite_deadlines", {}).get(item.nodeid)
    if watchdog is None or deadline is None:
        yield
        return
    watchdog.arm(item.nodeid, deadline)
    started = time.monotonic()
    try:
        yield
    finally:
        watchdog.disarm()
    if timing := getattr(item.config, "suite_timing", None):  # rank 0
        timing.finished(item.nodeid, time.monotonic() - started)


@pytest.fixture(scope="session")
def dist_context(pytestconfig):
    """The launched process group (a world of one without a launcher)."""
    import torch.distributed as dist

    from impl.dist import barrier, init_distributed
    from suite.watchdog import pg_timeout_s

    context = init_distributed(pg_timeout_s(getattr(pytestconfig, "suite_deadlines", {})))
    yield context
    barrier(context)
    # Tear the group down before the interpreter does: gloo threads must not outlive Python.
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _all_ranks_meet(request):
    """After every suite test all ranks meet, so skipped subgroup ranks wait for members.

    A study of one device (marker ``one_device``: the GEMM ladder, the offload family) in a
    launch of several ranks runs on rank 0 alone, as on one GPU: every rank running it at once
    would share the host's cores and memory bandwidth, and its rows would measure that. The
    other ranks meet rank 0 here, before they skip, in the barrier rank 0 reaches after it."""
    from impl.dist import barrier, idle_barrier

    if "dist_context" not in request.fixturenames:
        yield
        return
    context = request.getfixturevalue("dist_context")
    alone = request.node.get_closest_marker("one_device") is not None
    if alone and context.rank != 0:
        idle_barrier(context)  # asleep: rank 0's threads get every core (impl/dist.py)
        pytest.skip("a study of one device: rank 0 measures it alone")
    yield
    if alone:
        idle_barrier(context)
        return
    if context.world_size > 1:
        _finished_everywhere(request, context)
    barrier(context)


def _finished_everywhere(request, context) -> None:
    """Every rank counts itself in on the launch's store as it finishes a benchmark. A rank
    whose benchmark raised waits FAILED_WAIT_S for the others to finish it too (all raised
    alike: the pass goes on). Where they do not, they wait inside a collective this rank will
    never join (on 4 H100 two ranks of four failed in autotune, and the others waited out its
    deadline): the rank ends the pass, naming its error (suite/watchdog.py), and the launcher
    goes on after the benchmark."""
    from impl.dist import all_counted, count_in
    from suite.watchdog import FAILED_WAIT_S

    key = f"overlap/finished/{request.node.nodeid}"
    count_in(key)
    watchdog = getattr(request.config, "suite_watchdog", None)
    failed = getattr(request.node, "_suite_error", None)
    if watchdog is not None and failed and not all_counted(context, key, FAILED_WAIT_S):
        watchdog.end_pass()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A benchmark (or a fixture it uses) that raised on this rank: its error for the
    watchdog's record."""
    report = (yield).get_result()
    if report.when in ("setup", "call") and report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        error = (f"{crash.message.splitlines()[0]} ({Path(crash.path).name}:{crash.lineno})"
                 if crash else str(report.longrepr).strip().splitlines()[-1])
        item._suite_error = error
        if (watchdog := getattr(item.config, "suite_watchdog", None)) is not None:
            watchdog.failed(error)


@pytest.fixture(scope="session")
def sampler_factory(dist_context, pytestconfig):
    """Makes NVML samplers for the GPUs of a group of ranks (rank 0 samples them all)."""
    import torch.distributed as dist

    from impl.sampler import NvmlSampler

    uuids = [None] * dist_context.world_size
    local = None
    if dist_context.device.type == "cuda":
        import torch

        local = str(torch.cuda.get_device_properties(dist_context.device).uuid)
    if dist_context.world_size > 1:
        dist.all_gather_object(uuids, local)
    else:
        uuids = [local]
    period = pytestconfig.suite_choices["sampler_period_ms"]

    def make(world_size: int) -> NvmlSampler | None:
        if dist_context.device.type != "cuda":
            return None
        return NvmlSampler(uuids[:world_size], period)

    return make


def pytest_benchmark_update_machine_info(config, machine_info):
    from impl.fingerprint import fingerprint

    world = int(os.environ.get("WORLD_SIZE", "1"))
    backend = selected_backend()
    machine_info["overlap"] = fingerprint(backend, world, recorded_profile(backend))


def pytest_benchmark_update_commit_info(config, commit_info):
    """A copy of the source that states its commit (OVERLAP_GIT_COMMIT): that commit, not the
    copy's own HEAD, and dirty as impl.fingerprint.git_state decides."""
    if os.environ.get("OVERLAP_GIT_COMMIT"):
        from impl.fingerprint import git_state

        commit_info["id"], commit_info["dirty"] = git_state()
        commit_info["stated"] = True


def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["suite"] = {
        "schema": 1,
        "label": output_json["machine_info"]["overlap"]["machine_label"],
        "partial": getattr(config, "_suite_partial", False),
        "command": " ".join(sys.argv),
        "launcher_command": os.environ.get("OVERLAP_COMMAND"),
        "profile": output_json["machine_info"]["overlap"]["profile"],
        "mode": config.option.suite_mode,
        "hangs": getattr(config, "_suite_hangs", []),
        "timing": timing.to_json() if (timing := getattr(config, "suite_timing", None)) else None,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def finite(value):
    """NaN or infinity (say, an ops rate of a zero-length round) become null, not invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def uncaptured(config, line: str) -> None:
    """``line`` on stderr now, even from inside a test's setup or teardown (pytest captures
    their output and shows it only for a failing test)."""
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n{line}", file=sys.stderr, flush=True)


def results_document(config, partial: bool) -> dict | None:
    """Rank 0: the whole results document of the benchmarks so far (None elsewhere)."""
    session = getattr(config, "_benchmarksession", None)
    if config.suite_rank != 0 or session is None or not session.benchmarks:
        return None
    config._suite_partial = partial
    hook = config.hook
    machine_info = getattr(config, "_suite_machine_info", None) or session.get_machine_info()
    config._suite_machine_info = machine_info
    commit_info = hook.pytest_benchmark_generate_commit_info(config=config)
    hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit_info)
    output = hook.pytest_benchmark_generate_json(
        config=config, benchmarks=[b for b in session.benchmarks if b],
        include_data=True, machine_info=machine_info, commit_info=commit_info)
    hook.pytest_benchmark_update_json(config=config, benchmarks=session.benchmarks,
                                      output_json=output)
    return finite(json.loads(json.dumps(output, default=str)))


def write_results(config, partial: bool) -> None:
    """Rank 0: the whole results document to --results-json, via a temporary file.

    A write that fails (a full disk) is one line, the first time: the benchmarks go on, the
    last checkpoint stays whole, and the next checkpoint tries again."""
    path = config.option.results_json
    if not path or (document := results_document(config, partial)) is None:
        return
    from impl.atomic import write_json_atomic

    try:
        write_json_atomic(path, document)
    except OSError as error:
        if str(error) != str(getattr(config, "_suite_write_error", None)):
            uncaptured(config, f"[suite] rank 0: cannot write {path}: {error}; the run goes on "
                       "and writes it again after the next benchmark (the last whole "
                       "checkpoint stays)")
        config._suite_write_error = error
    else:
        config._suite_write_error = None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    # Checkpoint: a run that dies later keeps every benchmark finished so far, marked partial.
    if "benchmark" in getattr(item, "fixturenames", ()):
        write_results(item.config, partial=nextitem is not None)


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    partial = exitstatus not in (0, 5)
    write_results(config, partial)
    # The exit status stays: the checkpoint left is marked partial, which is what the launcher
    # reads (and torchrun would print a page for a failing worker).
    keep_elsewhere(config, partial)


def pytest_unconfigure(config):
    """The rank's session is over, its results written: the launcher may count it as ended
    even while it waits to exit (MPI's finalize waits for every rank; suite/pass_watch.py)."""
    if (watchdog := getattr(config, "suite_watchdog", None)) is not None:
        watchdog.finish()


def keep_elsewhere(config, partial: bool) -> None:
    """Rank 0, at the pass's end (or its watchdog's stop): where its results could not all be
    written, the whole pass goes to the temporary folder (often another disk), in one line."""
    if (error := getattr(config, "_suite_write_error", None)) is None:
        return
    from impl.atomic import write_json_atomic
    from suite.run_files import fallback_path

    path = config.option.results_json
    where = (f"{path} holds its last whole checkpoint, marked partial" if os.path.exists(path)
             else f"no checkpoint of it could be written as {path}")
    fallback = fallback_path(path)
    with contextlib.suppress(OSError):
        write_json_atomic(fallback, results_document(config, partial))
        where = f"all of them are in {fallback} instead ({where})"
    uncaptured(config, f"[suite] rank 0: the results of this pass could not all be "
               f"written ({error}); {where}")
