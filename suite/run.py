"""Run the whole suite on what this machine has and write one results file.

    python -m suite.run [--quick | --full] [--profiles nvlink,socket] [--workloads mlp_tiny]
                        [-- <pytest args>]

CPU only: 2 gloo ranks (one thread each) and the tiny presets. GPUs: torchrun over all of
them with the GPU presets, once per interconnect profile (NCCL reads its environment at
start-up, so each profile is its own launch). With MPI present, the mpi strategy runs in a
pass of its own under mpirun. Every pass writes its own file; they are merged into
results/<machine-label>/<UTC timestamp>-<suffix>.json (the suffix keeps runs started in the
same second apart), written whole and marked partial if a pass failed or the run was stopped.

Every argument, environment variable and the results folder are checked before anything is
created or launched: a bad one is one line on stderr and exit 2. Ctrl-C, SIGTERM or SIGHUP
stop the running pass within seconds (suite/launch.py), keep what finished in a whole file
marked partial, and exit 128 + the signal's number.
"""

from __future__ import annotations

import os
import signal
import sys


def stop_before_launch(signum: int, frame) -> None:
    """A stop before anything is created or launched: one line, nothing to clean up. It goes
    to the launcher's own stderr: the pre-launch check's pytest may be capturing fd 2."""
    os.write(STDERR, f"[suite] {signal.Signals(signum).name} before any pass started: "
                     "nothing launched, nothing written\n".encode())
    os._exit(128 + signum)


# What a pass imports, by module name: the project's dependencies and torch (installed apart).
NEEDED_MODULES = ("torch", "numpy", "scipy", "pytest", "pytest_benchmark", "jinja2")


def missing_modules_line() -> str | None:
    """One line naming what this Python lacks to run the suite, or None."""
    import importlib.util

    missing = [name for name in NEEDED_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (f"[suite] {sys.executable} lacks {', '.join(missing)}: set it up as the README's "
            "Setup says (torch, then pip install -e '.[test,studies]') or run nox -s bench")


if __name__ == "__main__":  # before the imports below: torch takes seconds to import
    STDERR = os.dup(2)
    for _signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_signum, stop_before_launch)
    if _missing := missing_modules_line():
        print(_missing, file=sys.stderr)
        sys.exit(2)

import argparse
import contextlib
import io
import json
import math
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from impl import capabilities, studies
from impl.atomic import unwritable
from impl.fingerprint import machine_label
from impl.kernels import sweep
from impl.profiles import ALWAYS, PROFILE_ENV, PROFILES, recorded_profile
from impl.rows.gate_records import PASS
from impl.settings import check_environment, selected_backend
from suite import budget, exit_codes, hangs, pipes
from suite.conftest import COLLECT_MPI_ENV, COLLECT_WORLD_ENV
from suite.launch import TAG_OUTPUT, Launcher
from suite.pass_watch import END_MARGIN_S, START_MARGIN_S, PassWatch, pass_deadline_s
from suite.run_files import (
    RunFolders,
    kept_elsewhere,
    read_pass_record,
    recover,
    write_merged,
    write_pass_record,
)
from suite.suite_options import SUITE_OPTIONS, check_suite_options
from suite.summary import summary_table

SUITE_FILES = studies.modules(studies.EVERY_RUN)
GPU_ONLY_FILES = studies.modules(studies.GPU_RUNS)
# What needs two processes joined by gloo whatever the machine: the coarse-grained hybrid's
# GPU worker and CPU worker (suite/bench_hybrid.py).
HYBRID_PASS_TESTS = ("suite/bench_hybrid.py::test_coarse",
                     "suite/bench_hybrid.py::test_coarse_comparison",
                     "suite/bench_hybrid.py::test_digits[coarse-hybrid]")
CPU_RANKS = 2
MAX_GLOO_RANKS = 64


class InputError(Exception):
    """A bad argument, variable or folder: one line on stderr, exit 2, nothing created."""


class NothingLeft(Exception):
    """--resume-after the last benchmark a pass selects: one line, exit 0, nothing launched."""


@dataclass
class Pass:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    output: Path | None = None
    # What the pre-launch check collects: the pass's pytest arguments, and the launch it will
    # have (world size, mpirun) as suite/conftest.py reads it while collecting.
    pytest_args: list[str] = field(default_factory=list)
    collect_env: dict[str, str] = field(default_factory=dict)
    # The sum of its benchmarks' deadlines, from that collection (suite/pass_watch.py): the
    # pass's own deadline adds its start and end margins. None: the pass has none.
    deadlines_s: float | None = None
    plan: budget.PassPlan | None = None  # what it is expected to take (suite/budget.py)
    wall_s: float | None = None  # what it took
    stalled: str | None = None  # why the launcher ended it as stalled, if it did


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def is_open_mpi(launcher: str) -> bool:
    result = subprocess.run([launcher, "--version"], capture_output=True, text=True, check=False)
    return "Open MPI" in result.stdout + result.stderr


def suite_files(gpus: int) -> list[str]:
    return [*SUITE_FILES, *(GPU_ONLY_FILES if gpus else ())]


def plan(mode: str, profiles: list[str], gpus: int, scratch: Path, pytest_args: list[str],
         skip_mpi: bool = False, ranks: int | None = None, quiet: bool = False) -> list[Pass]:
    """The passes of a run. ``profiles`` are NCCL profiles, or [GLOO] for a gloo run.
    ``quiet``: no note of skipped passes (the pre-launch check plans the run too)."""
    say = (lambda line: None) if quiet else (lambda line: print(line, flush=True))
    ranks = ranks or gpus or CPU_RANKS
    # suite.rank_start first: a rank ends with its launcher from its first second.
    common = ["-p", "suite.rank_start", "-p", "no:cacheprovider", "--suite-mode", mode, "-v",
              *pytest_args]
    passes = []
    for profile in profiles:
        files = suite_files(gpus)
        narrowed = []
        if profile in ("shm", "socket"):  # slower fabrics: the reference workload, several ranks
            narrowed = ["--strategies", "sequential,chunked,ddp", "--world-sizes",
                        ",".join(str(w) for w in (2, 4, 8) if w <= ranks),
                        "--workloads", "mlp_8192x12_bf16"]
            files = ["suite/bench_overlap.py", "suite/bench_allreduce.py"]
        output = scratch / f"{profile}.json.tmp"
        arguments = [*files, *common, *narrowed]
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={ranks}", "--local-ranks-filter=0", "-m", "pytest",
                   *arguments, "--results-json", str(output)]
        passes.append(Pass(f"torchrun {profile}", command, profile_env(profile), output,
                           arguments, {COLLECT_WORLD_ENV: str(ranks)}))
    if any(profile in PROFILES for profile in profiles) or ranks < 2:
        # The main pass cannot run the coarse-grained hybrid: NCCL, or one process. It gets
        # two gloo processes of its own (rank 0 takes the GPU where there is one); an
        # interconnect profile, an NCCL setting, does not apply to them.
        output = scratch / "hybrid.json.tmp"
        arguments = [*HYBRID_PASS_TESTS, *common]
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node=2", "--local-ranks-filter=0", "-m", "pytest",
                   *arguments, "--results-json", str(output)]
        passes.append(Pass("torchrun hybrid", command,
                           {"OVERLAP_BACKEND": "gloo", PROFILE_ENV: ""}, output, arguments,
                           {COLLECT_WORLD_ENV: "2"}))
    if skip_mpi:
        say("[suite] mpi pass skipped: --skip-mpi")
    elif capabilities.missing_mpi() is None:
        launcher = capabilities.mpi_launcher()
        # --tag-output: the launcher shows rank 0's output only (suite/launch.py).
        extra = (["--allow-run-as-root", "--oversubscribe", TAG_OUTPUT] if is_open_mpi(launcher)
                 else [])
        output = scratch / "mpi.json.tmp"
        # On GPUs MPI stages every chunk through host memory: seconds per step for the
        # 1.5 GiB reference model, so this pass uses the smaller transformer, at one K (half a
        # second a step on 2 H200: a cell takes over a minute; its cell keeps mpi-sequential).
        narrowed = ["--workloads", "gpt_small_bf16", "--chunks", "10"] if gpus else []
        arguments = ["suite/bench_overlap.py", *common, "--strategies", "mpi", "--world-sizes",
                     str(ranks), *narrowed]
        if gpus and mode == "default":
            # Within the default run's budget: the quick mode's rounds (6 interleaved rounds of
            # 2 steps instead of 12 of 3), a 0.5 s step staged through host memory.
            arguments[arguments.index("--suite-mode") + 1] = "quick"
        command = [launcher, *extra, "-n", str(ranks), sys.executable, "-m", "pytest",
                   *arguments, "--results-json", str(output)]
        passes.append(Pass("mpirun", command, {"MASTER_PORT": str(free_port()),
                                               **profile_env(profiles[0])}, output, arguments,
                           {COLLECT_WORLD_ENV: str(ranks), COLLECT_MPI_ENV: "1"}))
    else:
        say(f"[suite] mpi pass skipped: {capabilities.missing_mpi()}")
    return passes


def profile_env(profile: str) -> dict[str, str]:
    """OVERLAP_PROFILE for an NCCL profile; nothing for gloo, where profiles do not apply."""
    return {PROFILE_ENV: profile} if profile in PROFILES else {}


def run_pass(step: Pass, base_env: dict[str, str], launcher: Launcher,
             watch: PassWatch) -> int | None:
    """The pass's exit status, or None when a stop signal came before it started."""
    if launcher.stop_signal is not None:
        return None
    print(f"\n[suite] {step.name}: {shlex.join(step.command)}", flush=True)
    if step.deadlines_s is not None:
        print(f"[suite] {step.name}: deadline {watch.deadline_s:.0f} s (its benchmarks' "
              f"{step.deadlines_s:.0f} s, plus {START_MARGIN_S:g} s to start and "
              f"{END_MARGIN_S:g} s to end)", flush=True)
    record = {PASS.name: step.name, PASS.command: step.command, PASS.env: step.env,
              PASS.planned_s: step.plan and round(step.plan.total_s, 1)}
    if step.output is not None:
        write_pass_record(step.output, record)
    started = time.monotonic()
    code = launcher.run(step.command, {**base_env, **step.env}, watch)
    step.wall_s = time.monotonic() - started
    if step.output is not None:
        write_pass_record(step.output, {**record, PASS.exit: code,
                                           PASS.wall_s: round(step.wall_s, 1)})
    killed = f" (killed by {signal.Signals(-code).name})" if code is not None and code < 0 else ""
    if launcher.stalled is not None:
        killed += " (the launcher ended it: it stalled)"
    print(f"[suite] {step.name} finished with exit {code}{killed} in {step.wall_s:.0f} s",
          flush=True)
    return code


def resumed_pass(step: Pass, arguments: list[str], attempt: int) -> Pass:
    """``step`` again, writing a file of its own, with ``arguments`` (hangs.resume_arguments)
    after its pytest arguments: it goes on after the benchmark that hung."""
    output = step.output.with_name(f"{step.output.name.split('.')[0]}.resume{attempt}.json.tmp")
    command = list(step.command)
    command[command.index("--results-json") + 1] = str(output)
    if "--resume-after" in command:  # an earlier resume's point: this one is further on
        at = command.index("--resume-after")
        del command[at:at + 2]
    name = step.name.removesuffix(" (resumed)")
    return Pass(f"{name} (resumed)", [*command, *arguments], step.env, output,
                deadlines_s=step.deadlines_s, plan=step.plan)


def run_passes(passes: list[Pass], env: dict[str, str],
               launcher: Launcher) -> tuple[list[Pass], list[int | None], list[dict]]:
    """Every pass in turn, and the hangs found. A pass stopped by a benchmark's deadline
    (suite/watchdog.py) or ended as stalled (suite/pass_watch.py) leaves hang records or
    stack dumps: their stacks go to the log, and a fresh pass goes on after the hung
    benchmark (and what was measured with it), so a hang costs one deadline and the rest of
    the suite still runs."""
    queue, done, codes, found = list(passes), [], [], []
    while queue:
        step = queue.pop(0)
        no_deadline = step.deadlines_s is None
        watch = PassWatch(math.inf if no_deadline else pass_deadline_s(step.deadlines_s),
                          step.output)
        codes.append(run_pass(step, env, launcher, watch))
        step.stalled = launcher.stalled
        done.append(step)
        # A rank the launcher continued to take its stack went on from where it was stopped:
        # its dump says where that was, a record it wrote after that would not.
        records = [record for record in hangs.read_records(step.output)
                   if record["rank"] not in watch.continued]
        dumps = {**hangs.backstop_dumps(step.output), **watch.taken}
        if (hang := hangs.summary(records, dumps)) is None:
            continue
        if launcher.stalled is not None:  # ended by the launcher (suite/pass_watch.py)
            hang["stalled"], hang["stuck"] = launcher.stalled, launcher.stuck
        print(hangs.log_text(hang, records, dumps), flush=True)
        found.append({"pass": step.name, **hang})
        if (arguments := hangs.resume_arguments(hang)) and launcher.stop_signal is None:
            queue.insert(0, resumed_pass(step, arguments, len(found)))
    return done, codes, found


def merge(passes: list[Pass], codes: list[int | None], command: str, label: str,
          stop_signal: str | None = None) -> dict | None:
    """One document of every benchmark the passes finished; None when none finished.

    A pass stopped part-way left a whole file of what it finished (conftest.py checkpoints
    after every benchmark); a pass that never started has exit ``None``.
    """
    documents = []
    for step in passes:
        if step.output and step.output.exists():
            documents.append((step, json.loads(step.output.read_text())))
    if not documents:
        return None
    merged = dict(documents[0][1])
    merged["benchmarks"] = [b for _, doc in documents for b in doc["benchmarks"]]
    # A pass that ended well but whose file is partial could not write all it measured.
    incomplete = {s.name for s, doc in documents if doc.get("suite", {}).get("partial")}
    failed = [s.name for s, code in zip(passes, codes)
              if code not in (0, 5) or (code is not None and s.name in incomplete)]
    timing = {step.name: doc.get("suite", {}).get("timing") for step, doc in documents}
    merged["suite"] = {
        **{k: v for k, v in documents[0][1].get("suite", {}).items() if k != "timing"},
        "label": label, "command": command,
        "partial": (bool(failed) or stop_signal is not None
                    or any(doc.get("suite", {}).get("partial") for _, doc in documents)),
        "failed_passes": failed,
        "stopped_by": stop_signal,
        "passes": [{PASS.name: s.name, PASS.command: shlex.join(s.command), PASS.env: s.env,
                    PASS.exit: code, PASS.wall_s: s.wall_s and round(s.wall_s, 1),
                    PASS.planned_s: s.plan and round(s.plan.total_s, 1),
                    PASS.timing: timing.get(s.name)} for s, code in zip(passes, codes)],
    }
    return merged


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise InputError(message)  # one line, not argparse's usage block


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The launcher's options and the pytest arguments: the suite's options given before
    ``--`` followed by everything after it. Anything else before ``--`` is refused."""
    pytest_args = []
    if "--" in argv:
        at = argv.index("--")
        argv, pytest_args = argv[:at], argv[at + 1:]
    parser = _Parser(prog="python -m suite.run", description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", const="quick", dest="mode")
    size.add_argument("--full", action="store_const", const="full", dest="mode")
    parser.add_argument("--profiles", default=None,
                        help=f"comma-separated interconnect profiles from {', '.join(PROFILES)} "
                             "(NCCL only; default: nvlink; --full on several GPUs: "
                             "nvlink,shm,socket)")
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--skip-mpi", action="store_true", help="leave out the mpirun pass")
    parser.add_argument("--recover", action="store_true",
                        help="only merge what runs whose launcher ended first (SIGKILL, a "
                             "crash) left in the results folder; every run does this first")
    parser.add_argument("--ranks", type=int, default=None,
                        help="processes to launch (default: one per GPU, or 2 gloo ranks on "
                             "CPU); with GPUs at most their number")
    suite = parser.add_argument_group("suite options (passed to pytest, checked here first)")
    for option in SUITE_OPTIONS:
        if option.flag != "--suite-mode":  # set by --quick / --full
            suite.add_argument(option.flag, default=None, help=option.help)
    args = parser.parse_args(argv)
    given = [[option.flag, str(getattr(args, option.dest))] for option in SUITE_OPTIONS
             if getattr(args, option.dest, None) is not None]
    return args, [*(part for pair in given for part in pair), *pytest_args]


def choose_profiles(requested: str | None, backend: str, gpus: int, mode: str) -> list[str]:
    """The NCCL profiles to run, or [gloo's label] when the run uses gloo."""
    if backend == "gloo":
        if requested is not None:
            raise InputError(f"--profiles={requested}: interconnect profiles are NCCL settings "
                             "and this run uses gloo (no GPU, or OVERLAP_BACKEND=gloo); leave "
                             "--profiles out")
        return [recorded_profile("gloo")]
    if requested is not None:
        profiles = [p.strip() for p in requested.split(",") if p.strip()]
        unknown = [p for p in profiles if p not in PROFILES]
        if unknown or not profiles:
            raise InputError(f"--profiles={requested}: choose from {', '.join(PROFILES)}")
        return profiles
    if gpus >= 2 and mode == "full":
        # Slower fabrics only in --full: the socket pass alone took over 9 minutes on 4 H200
        # (1.5 GiB per step at ~3.5 GB/s), which would break the default's 10-minute budget.
        return ["nvlink", "shm", "socket"]
    return ["nvlink"]  # one GPU: fabric profiles change nothing


def check_ranks(ranks: int | None, backend: str, gpus: int) -> None:
    limit = gpus if backend == "nccl" else MAX_GLOO_RANKS
    if ranks is not None and not 1 <= ranks <= limit:
        where = f"this machine has {gpus} GPUs" if backend == "nccl" else "gloo ranks"
        raise InputError(f"--ranks={ranks}: choose 1 to {limit} ({where})")


def check_results_folder(results_dir: str, label: str) -> Path:
    """results_dir/label, if it is or can be made a writable folder (nothing is created)."""
    if not results_dir.strip():  # Path("") is the current folder: results in the checkout
        raise InputError(f"--results-dir={results_dir!r}: give a folder (default: results)")
    folder = Path(results_dir, label)
    if problem := unwritable(folder):
        raise InputError(f"--results-dir={results_dir}: {problem}")
    return folder


def pytest_complaint(output: str) -> str:
    """pytest's reason for refusing a command line, as one line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:  # argparse: "...: error: unrecognized arguments: --quik"
        if ": error: " in line:
            return line.split(": error: ", 1)[1]
    for line in lines:  # pytest's own: "ERROR: --chunks: '0' is not an integer from 1 to 256"
        if line.startswith("ERROR: "):
            return line.removeprefix("ERROR: ")
    return lines[-1] if lines else "pytest refused the arguments"


@contextlib.contextmanager
def environment(overrides: dict[str, str]):
    """``os.environ`` with ``overrides`` for the duration, as it was afterwards."""
    saved = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Deadlines:
    """A pytest plugin: the collected benchmarks' deadlines (conftest.py plans them while
    collecting)."""

    def __init__(self):
        self.planned: dict = {}

    def pytest_collection_finish(self, session) -> None:
        self.planned = getattr(session.config, "suite_deadlines", {})


def collect(step: Pass, machine: str, rates: budget.Rates) -> tuple[int, str]:
    """pytest's exit status and output for collecting ``step``'s benchmarks here, as the
    pass's launch will see them (its world size, mpirun or not, its profile); the sum of their
    deadlines goes to ``step.deadlines_s``, what they are expected to take to ``step.plan``.
    A benchmark planned longer than its mode's whole budget is refused (InputError)."""
    import pytest

    output, deadlines = io.StringIO(), Deadlines()
    with (environment({**step.env, **step.collect_env}), contextlib.redirect_stdout(output),
          contextlib.redirect_stderr(output)):
        code = pytest.main([*step.pytest_args, "--collect-only", "-q"], plugins=[deadlines])
    step.deadlines_s = sum(d.seconds for d in deadlines.planned.values())
    step.plan = budget.pass_plan(step.name, machine, deadlines.planned.values(), rates)
    mode = step.pytest_args[step.pytest_args.index("--suite-mode") + 1]
    if problem := budget.over_budget(deadlines.planned, machine, mode, rates):
        raise InputError(problem)
    return code, output.getvalue()


def check_pytest_args(passes: list[Pass], pytest_args: list[str],
                      machine: str | None = None) -> dict[str, Pass]:
    """Let pytest read the arguments and collect every pass here, before anything launches.

    --collect-only runs no benchmark and writes nothing, but pytest parses every option and
    conftest.py checks the options (suite.suite_options) as in a real run: an unknown option,
    a bad value, an unreadable -k expression or a missing file is refused now, as one line,
    instead of failing in every rank of every pass. Each pass is collected for the launch it
    will have, so a -k naming two-rank benchmarks finds them; the arguments are refused when
    no pass selects anything. Returns the passes that select something, by name, with the sum
    of their benchmarks' deadlines and their plan: a pass that selects nothing is not launched
    (its ranks would all exit "no tests collected", which torchrun reports as a failure).
    """
    import pytest

    selected, rates = {}, budget.load_rates()
    machine = machine or budget.machine_class(capabilities.gpu_count())
    for step in passes:
        code, output = collect(step, machine, rates)
        if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            raise InputError(f"pytest: {pytest_complaint(output)}")
        if code == pytest.ExitCode.OK:
            selected[step.name] = step
    if not selected and any(arg.startswith("--resume-after") for arg in pytest_args):
        raise NothingLeft("nothing left to run: --resume-after names the last benchmark the "
                          "pytest arguments select")
    if not selected:
        raise InputError("no benchmark of the suite is selected by the pytest arguments "
                         f"{shlex.join(pytest_args)} ({', '.join(s.name for s in passes)})")
    return selected


@dataclass
class Checked:
    """A run's inputs, every one checked before anything is created or launched."""

    args: argparse.Namespace
    pytest_args: list[str]
    mode: str
    gpus: int
    profiles: list[str]
    label: str
    workdir: Path  # the results folder of this machine's runs
    selecting: dict[str, Pass]  # the passes that select a benchmark (check_pytest_args)
    seed: str  # the GEMM sweep's fresh shapes' seed (sweep.seed_for_run), for every pass


def check_inputs(argv: list[str]) -> Checked:
    """Check the arguments, the environment and the results folder, and collect every pass.
    Raises InputError or ValueError naming a bad one, NothingLeft where --resume-after names
    the last benchmark selected."""
    args, pytest_args = parse(argv)
    check_suite_options(vars(args))  # those given before "--"; pytest checks the rest
    check_environment()
    seed = str(sweep.seed_for_run())
    mode = args.mode or "default"
    gpus = capabilities.gpu_count()
    backend = selected_backend()
    profiles = choose_profiles(args.profiles, backend, gpus, mode)
    check_ranks(args.ranks, backend, gpus)
    label = machine_label()
    workdir = check_results_folder(args.results_dir, label)
    # This collection draws the GEMM sweep's fresh shapes with the seed every pass will use.
    with environment({sweep.SEED_VARIABLE: seed}):
        selecting = {} if args.recover else check_pytest_args(
            plan(mode, profiles, gpus, workdir, pytest_args, args.skip_mpi, args.ranks,
                 quiet=True), pytest_args, budget.machine_class(gpus))
    return Checked(args, pytest_args, mode, gpus, profiles, label, workdir, selecting, seed)


def planned_passes(checked: Checked, scratch: Path) -> list[Pass]:
    """The passes to launch, each with the deadlines and plan its pre-launch collection found;
    one line for each pass the pytest arguments leave empty, then the run's time budget."""
    args, gpus, selecting = checked.args, checked.gpus, checked.selecting
    passes = plan(checked.mode, checked.profiles, gpus, scratch, checked.pytest_args,
                  args.skip_mpi, args.ranks)
    for step in passes:
        if step.name not in selecting:
            print(f"[suite] {step.name} pass skipped: the pytest arguments select none "
                  "of its benchmarks", flush=True)
    passes = [step for step in passes if step.name in selecting]
    for step in passes:
        step.deadlines_s = selecting[step.name].deadlines_s
        step.plan = selecting[step.name].plan
    where = (f"{args.ranks or gpus} of {gpus} GPUs" if gpus
             else f"the CPU, {args.ranks or CPU_RANKS} gloo ranks")
    for line in budget.plan_lines([step.plan for step in passes], checked.mode, where,
                                  budget.load_rates()):
        print(line, flush=True)
    if gpus and checked.mode != "quick":
        print(f"[suite] the GEMM sweep's fresh shapes: seed {checked.seed} (each row records "
              f"it; {sweep.SEED_VARIABLE}={checked.seed} draws them again)", flush=True)
    return passes


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        checked = check_inputs(argv)
    except (InputError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except NothingLeft as done:
        print(f"[suite] {done}; nothing launched, nothing written")
        return 0
    # Every pass draws the GEMM sweep's fresh shapes with one seed, the one checked above.
    os.environ[sweep.SEED_VARIABLE] = checked.seed
    args, workdir, gpus = checked.args, checked.workdir, checked.gpus
    if args.recover:
        lines = recover(workdir, recovered) if workdir.is_dir() else []
        print("\n".join(lines) or f"[suite] nothing to recover in {workdir}")
        return 0
    command = shlex.join(["python", "-m", "suite.run", *argv])
    env = {**os.environ, **ALWAYS, "OVERLAP_COMMAND": command, "PYTHONUNBUFFERED": "1"}
    if not gpus:
        env.setdefault("OMP_NUM_THREADS", "1")  # 2 ranks on 2 cores: one thread each

    launcher = Launcher()
    started = time.monotonic()
    # From here on a stop signal ends the run through the launcher (suite/launch.py).
    with launcher.handling_signals():
        try:
            folders = RunFolders.make(workdir)
        except OSError as error:  # the results folder could not be made after all
            print(f"error: --results-dir={args.results_dir}: {error}", file=sys.stderr)
            return 2
        for line in recover(workdir, recovered):  # what a killed launcher left behind
            print(line, flush=True)
        passes, codes, hung, merged, target = [], [], [], None, None
        try:
            passes = planned_passes(checked, folders.scratch)
            passes, codes, hung = run_passes(passes, env, launcher)
            stopped = launcher.stop_signal.name if launcher.stop_signal else None
            merged = merge(passes, codes, command, checked.label, stopped)
            if merged:
                merged["suite"]["hangs"] = hung
            target = write_merged(workdir / f"{folders.name}.json", merged)
        finally:
            folders.finish([step.output for step in passes], written=target is not None)
        incomplete = bool(merged and merged["suite"]["failed_passes"])
        status = run_exit_status(passes, codes, hung, launcher.stop_signal, incomplete)
        elsewhere = kept_elsewhere([step.output for step in passes])
        if elsewhere:  # the results folder had no room for them (conftest.py)
            print(f"[suite] the results folder {workdir} had no room for every pass's results; "
                  f"they are kept whole in {', '.join(map(str, elsewhere))}", file=sys.stderr)
        if merged is None:
            if not elsewhere:
                print("[suite] no benchmark finished; nothing written", file=sys.stderr)
            return status or 1
        print("\n" + summary_table(merged))
        for line in outcome_lines(passes, time.monotonic() - started):
            print(line)
        if target is None:  # the merged file could not be written; each pass's file is kept
            return status or 1
        state = "PARTIAL " if merged["suite"]["partial"] else ""
        print()
        pipes.last_line(f"[suite] wrote {state}{target} ({len(merged['benchmarks'])} "
                        f"benchmarks) in {time.monotonic() - started:.0f} s")
        for hang in hung:
            print(hangs.outcome_line(hang))
        return status


def recovered(documents: list[tuple[Path, dict]], name: str) -> dict:
    """The results document of a run whose launcher ended before merging its passes' files
    (suite/run_files.py's ``recover``): merged as a stopped run's, marked partial; each pass
    with its command, exit and wall time where its record beside the file kept them (the plan
    as one number: a PassPlan of its total)."""
    records = [read_pass_record(path) for path, _ in documents]
    passes = [Pass(record.get(PASS.name) or path.name.removesuffix(".json.tmp"),
                   record.get(PASS.command) or [], record.get(PASS.env) or {}, output=path,
                   wall_s=record.get(PASS.wall_s),
                   plan=budget.PassPlan(record[PASS.name], "", start_s=record[PASS.planned_s])
                   if record.get(PASS.planned_s) is not None else None)
              for (path, _), record in zip(documents, records)]
    suite = documents[0][1].get("suite", {})
    merged = merge(passes, [record.get(PASS.exit) for record in records],
                   suite.get("launcher_command") or "unknown",
                   suite.get("label") or "unknown", stop_signal="its launcher ended")
    merged["suite"]["recovered_as"] = name
    return merged


def outcome_lines(passes: list[Pass], wall_s: float) -> list[str]:
    """Expected against actual time, per pass that ran and for the whole run."""
    ran = [step for step in passes if step.plan is not None and step.wall_s is not None]
    lines = [budget.outcome_line(step.name, step.plan.total_s, step.wall_s) for step in ran]
    planned = sum(step.plan.total_s for step in ran if "(resumed)" not in step.name)
    return [*lines, budget.outcome_line("the whole run", planned, wall_s)]


def run_exit_status(passes: list[Pass], codes: list[int | None], hung: list[dict],
                    stop_signal: int | None, incomplete: bool) -> int:
    """The run's exit status (suite/exit_codes.py's table): a pass with a hang, or one the
    launcher ended as stalled, is a hang whatever torchrun or mpirun returned for it."""
    hung_passes = {hang["pass"] for hang in hung}
    statuses = [exit_codes.pass_status(code, step.name in hung_passes or step.stalled is not None)
                for step, code in zip(passes, codes)]
    return exit_codes.run_status(statuses, stop_signal, incomplete)


if __name__ == "__main__":
    pipes.guard()  # `... | head`: the run goes on quietly (suite/pipes.py)
    sys.exit(main())
