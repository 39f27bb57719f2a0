"""The other engines that serve chat templates (minijinja, @huggingface/jinja, llama.cpp), each run in a limited subprocess.

Every engine is a driver (package data in ``drivers/``) that reads ``{"source": ..., "contexts": [...]}``
as JSON on stdin and writes ``{"ready": true}`` once it has started and parsed the template, then one
JSON line per context: ``{"text": ...}`` or ``{"error": ...}``. The
engines are installed on demand into :func:`engines_dir` (``~/.cache/chatjinja/engines``): the minijinja Python package is imported from the
running interpreter, ``@huggingface/jinja`` is installed from npm at a pinned version and integrity,
llama.cpp's engine is compiled with the system C++ compiler from the sources in the pinned
``llama-cpp-python`` sdist (sha256 checked). An untrusted template has no chatjinja budget in
those engines, so each render runs in a subprocess that stops at the limits chatjinja applies to its
own render (:class:`EngineLimits`): a wall-clock kill at chatjinja's render timeout, a memory limit
(``RLIMIT_DATA``) at what a chatjinja render is bounded to, and a cap on the output read back at the
probe renders' output limit; the caller's deadline (the run's budget, :mod:`.budget`) bounds the batch.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import importlib.metadata
import json
import logging
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import ChatJinjaError
from ..observation import OUTPUT_LIMIT
from ..runtime.budget import DEFAULT_BUDGETS

__all__ = [
    "ENGINE_MEMORY",
    "ENGINE_NAMES",
    "Engine",
    "EngineLimits",
    "EngineResult",
    "EngineUnavailable",
    "available_engines",
    "engine",
    "engines_dir",
]

ENGINE_NAMES = ("minijinja", "hfjs", "llamacpp")

HFJS_PACKAGE = "@huggingface/jinja"
HFJS_VERSION = "0.5.11"
# the npm registry's integrity of @huggingface/jinja 0.5.11, checked after the install
HFJS_INTEGRITY = "sha512-YzEzwM5oQf4r0vs7ifWQ+yuVR1YkAHrjERQ+a8WRsStHHp4NRBg+NesjiFc+X2AFUpRvvrIeHDS1xFy9jY/IjQ=="

LLAMACPP_SDIST = "llama-cpp-python"
LLAMACPP_VERSION = "0.3.36"
LLAMACPP_SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# the files of vendor/llama.cpp/ the engine is built from (the Jinja engine, its UTF-8 helpers and
# the JSON wrapper over nlohmann json that global_from_json reads)
_LLAMACPP_SOURCES = (
    "common/jinja/lexer.cpp", "common/jinja/parser.cpp", "common/jinja/runtime.cpp",
    "common/jinja/value.cpp", "common/jinja/string.cpp", "common/unicode.cpp", "common/json.cpp",
)
_LLAMACPP_HEADERS = (
    "common/jinja/lexer.h", "common/jinja/parser.h", "common/jinja/runtime.h", "common/jinja/value.h",
    "common/jinja/string.h", "common/jinja/utils.h", "common/unicode.h", "common/json.h",
    "vendor/nlohmann/json.hpp", "vendor/nlohmann/json_fwd.hpp",
)
# json.cpp includes ggml.h for GGML_ASSERT only
_GGML_STUB = (
    "#pragma once\n#include <cstdio>\n#include <cstdlib>\n"
    "#define GGML_ASSERT(x) do { if (!(x)) { std::fprintf(stderr, \"GGML_ASSERT(%s) failed\\n\", #x); std::abort(); } } while (0)\n"
)
_CXXFLAGS = ("-std=c++17", "-O2")

_DRIVERS = Path(__file__).with_name("drivers")
#: says (at INFO) when an engine is being installed or built, which takes from seconds to minutes
logger = logging.getLogger("chatjinja.portability")
logger.addHandler(logging.NullHandler())


class EngineUnavailable(ChatJinjaError):
    """An engine cannot run here; ``reason`` says what is missing (no node, no compiler, no package, ...)."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


#: bytes one engine process may hold: the 512 MB every attack on chatjinja's own render ends within
#: (SECURITY.md, "Bounded resources"; ``tests/security/test_payloads.py``)
ENGINE_MEMORY = 512 << 20
#: what :attr:`EngineResult.limit` names: the render's time, its output, the process's memory, the batch's deadline
LIMITS = ("time", "output", "memory", "deadline")
# what each engine says when its memory limit stops an allocation: Python's MemoryError (minijinja's
# driver), C++'s std::bad_alloc (llama.cpp), V8's "JavaScript heap out of memory" and "Fatal process out
# of memory", Rust's "memory allocation of N bytes failed" (minijinja's core, then an abort)
_OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "out of memory", "memory allocation of")


@dataclass(frozen=True, slots=True)
class EngineResult:
    """One render by an engine: its text, or its error in one line. ``limit`` names the limit that
    stopped it (one of :data:`LIMITS`): such a render was not finished, so it is compared with nothing."""

    text: str | None
    error: str | None = None
    limit: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class EngineLimits:
    """What one engine subprocess may take: seconds per render (then it is killed; chatjinja's render
    timeout), seconds more for the process to start (added to the first render in it), seconds for a
    whole batch when the caller gives no deadline, bytes of memory (``RLIMIT_DATA``, and ``RLIMIT_AS``
    above what the engine reserves) and characters of output per render (the probe renders' limit)."""

    case_timeout: float = DEFAULT_BUDGETS.timeout if DEFAULT_BUDGETS.timeout is not None else 1.0
    start_timeout: float = 2.0
    batch_timeout: float = 20.0
    memory: int = ENGINE_MEMORY
    output: int = OUTPUT_LIMIT


DEFAULT_LIMITS = EngineLimits()


@dataclass
class Engine:
    """An engine ready to render: its name, version and the driver command that speaks the JSON protocol."""

    name: str
    version: str
    command: tuple[str, ...]
    limits: EngineLimits = DEFAULT_LIMITS
    #: address space the engine takes before any render (node reserves about 0.8 GiB at start), added to
    #: ``limits.memory`` for its ``RLIMIT_AS`` (its ``RLIMIT_DATA``, what it writes to, is ``limits.memory``)
    reserved: int = 0

    def render(self, source: str, context: dict) -> EngineResult:
        """Render ``source`` with the template variables ``context`` (see :mod:`chatjinja.portability.context`)."""
        return self.render_many(source, [context])[0]

    def render_many(self, source: str, contexts: list[dict], *, deadline: float | None = None,
                    clock: Callable[[], float] = time.monotonic) -> list[EngineResult]:
        """Render ``source`` once per context, in one subprocess (a new one after a render is killed), the
        whole batch by ``deadline`` on ``clock`` (else within ``limits.batch_timeout``): a context the batch
        does not reach in time is a result whose ``limit`` is ``"deadline"``."""
        return _run_driver(self.command, source, list(contexts), self.limits, self.reserved, deadline, clock)


# --- the subprocess runner ---------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
try:  # Linux: the engine is killed when the thread that started it dies, even by SIGKILL
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


def _limit_process(memory: int, address_space: int) -> Any:
    parent = os.getpid()

    def preexec() -> None:
        for which, value in ((resource.RLIMIT_DATA, memory), (resource.RLIMIT_AS, address_space), (resource.RLIMIT_CORE, 0)):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (value, value))
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # chatjinja died before the line above
                os._exit(1)

    return preexec


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.kill()
    process.wait()


def _feed(process: subprocess.Popen, payload: bytes) -> None:
    try:
        assert process.stdin is not None
        process.stdin.write(payload)
        process.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _out_of_memory(message: str) -> bool:
    return any(word in message for word in _OUT_OF_MEMORY)


def _death(process: subprocess.Popen, stderr: bytes) -> EngineResult:
    try:
        code = process.wait(timeout=2)
    except subprocess.TimeoutExpired:  # it closed its output but lives on
        _kill(process)
        return EngineResult(None, "engine process closed its output without a result (engine process killed)")
    text = stderr.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1][:200] if lines else ""
    if code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exited with status {code}"
    if _out_of_memory(text):  # say the engine's own words for it, not the last line (a backtrace's)
        said = next(line for line in lines if _out_of_memory(line))[:200]
        return EngineResult(None, f"engine process {how}: {said} (memory limit)", "memory")
    return EngineResult(None, f"engine process {how}" + (f": {last}" if last else "") + " (memory limit or crash)")


def _run_driver(command: tuple[str, ...], source: str, contexts: list[dict], limits: EngineLimits, reserved: int = 0,
                deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> list[EngineResult]:
    """Run the driver on the contexts; a render past a limit gets an error and the rest go to a new process,
    until ``deadline`` (on ``clock``): the contexts after it are not run."""
    results: list[EngineResult] = []
    if deadline is None:
        deadline = clock() + limits.batch_timeout
    while len(results) < len(contexts):
        if clock() >= deadline:
            results += [EngineResult(None, "not run: the batch's time ran out", "deadline")] * (len(contexts) - len(results))
            break
        pending = contexts[len(results):]
        try:
            # ASCII JSON: a lone surrogate in the template or the data reaches every driver as an escape
            payload = json.dumps({"source": source, "contexts": pending}).encode("ascii")
        except (TypeError, ValueError) as error:
            raise TypeError(f"engine contexts must be JSON data: {error}") from None
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                preexec_fn=_limit_process(limits.memory, limits.memory + reserved), start_new_session=True,
            )
        except OSError as error:
            results += [EngineResult(None, f"engine could not start: {error}")] * (len(contexts) - len(results))
            break
        feeder = threading.Thread(target=_feed, args=(process, payload), daemon=True)
        try:  # from the moment Popen returns (before it, PR_SET_PDEATHSIG is the backstop)
            feeder.start()
            done, failure = _read_results(process, len(pending), limits, deadline, clock)
        finally:  # whatever happened (an interrupt too), the engine's process group goes
            _kill(process)
            if feeder.is_alive():
                feeder.join(timeout=1)
            for stream in (process.stdin, process.stdout, process.stderr):
                with contextlib.suppress(Exception):
                    stream.close()  # type: ignore[union-attr]
        results += done
        if failure is not None:
            results.append(failure)
    return results


def _read_results(process: subprocess.Popen, wanted: int, limits: EngineLimits, deadline: float,
                  clock: Callable[[], float]) -> tuple[list[EngineResult], EngineResult | None]:
    """The results the process writes, until it has written ``wanted``, dies or passes a limit (the failure)."""
    assert process.stdout is not None and process.stderr is not None
    line_cap = 6 * limits.output + 4096  # JSON escapes at most 6 bytes per character
    done: list[EngineResult] = []
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ, "out")
    selector.register(process.stderr, selectors.EVENT_READ, "err")
    buffer = bytearray()
    scanned = 0  # the buffer holds no newline before this offset
    stderr = b""
    ready = False  # the driver has started and parsed the template: the renders' clocks run from then
    case_deadline = clock() + limits.start_timeout
    open_streams = 2
    try:
        while open_streams and len(done) < wanted:
            now = clock()
            if now >= min(case_deadline, deadline):
                if case_deadline > deadline:
                    return done, EngineResult(None, "not finished: the batch's time ran out (engine process killed)", "deadline")
                if not ready:
                    return done, EngineResult(None, f"timeout: the engine did not start within {limits.start_timeout:g} s (engine process killed)", "time")
                return done, EngineResult(None, f"timeout: no result within {limits.case_timeout:g} s (engine process killed)", "time")
            for key, _ in selector.select(min(case_deadline, deadline) - now):
                chunk = os.read(key.fileobj.fileno(), 1 << 16)  # type: ignore[union-attr]
                if not chunk:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                if key.data == "err":
                    stderr = (stderr + chunk)[-4096:]
                    continue
                buffer += chunk
                while len(done) < wanted:
                    end = buffer.find(b"\n", scanned)
                    if end < 0:
                        scanned = len(buffer)
                        break
                    line = bytes(buffer[:end])
                    del buffer[:end + 1]
                    scanned = 0
                    case_deadline = clock() + limits.case_timeout
                    if not ready and _is_ready(line):
                        ready = True
                        continue
                    ready = True  # a driver that does not say it is ready: its first result says so
                    done.append(_parse_line(line, limits))
                if len(buffer) > line_cap:
                    return done, EngineResult(None, f"output limit: over {limits.output} characters (engine process killed)", "output")
    finally:
        selector.close()
    if len(done) < wanted:
        return done, _death(process, stderr)
    return done, None


def _is_ready(line: bytes) -> bool:
    try:
        return json.loads(line) == {"ready": True}
    except ValueError:
        return False


def _parse_line(line: bytes, limits: EngineLimits) -> EngineResult:
    try:
        answer = json.loads(line)
    except ValueError:
        return EngineResult(None, "engine driver wrote a line that is not JSON")
    if not isinstance(answer, dict):
        return EngineResult(None, "engine driver wrote a line that is not a JSON object")
    text = answer.get("text")
    if isinstance(text, str):
        if len(text) > limits.output:
            return EngineResult(None, f"output limit: {len(text)} characters", "output")
        return EngineResult(text)
    error = " ".join(str(answer.get("error")).split())[:300] or "error"
    # the engine's own report of its memory limit: Python's MemoryError (minijinja's driver), C++'s bad_alloc (llama.cpp's)
    if error.startswith("MemoryError") or "std::bad_alloc" in error:
        return EngineResult(None, f"{error} (memory limit)", "memory")
    return EngineResult(None, error)


# --- where engines live ------------------------------------------------------------------------


def engines_dir() -> Path:
    """Where the npm package and the compiled llama.cpp engine are kept: ``$CHATJINJA_ENGINES_DIR``, else
    ``$XDG_CACHE_HOME/chatjinja/engines``, else ``~/.cache/chatjinja/engines`` (``$CHATJINJA_CACHE_DIR``,
    the compile cache's own folder, does not move them: a build outlives a cleared compile cache)."""
    explicit = os.environ.get("CHATJINJA_ENGINES_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "chatjinja" / "engines"


@contextlib.contextmanager
def _install_lock(name: str) -> Iterator[Path]:
    base = engines_dir()
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield base
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_tool(command: list[str], what: str, name: str, timeout: float, cwd: Path | None = None) -> None:
    try:
        completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EngineUnavailable(name, f"{what} took over {timeout:g} s") from None
    except OSError as error:
        raise EngineUnavailable(name, f"{what} could not start: {error}") from None
    if completed.returncode != 0:
        lines = [line for line in (completed.stderr or completed.stdout).splitlines() if line.strip()]
        raise EngineUnavailable(name, f"{what} failed: {lines[-1].strip() if lines else 'exit status ' + str(completed.returncode)}")


# --- minijinja ---------------------------------------------------------------------------------


def _minijinja(limits: EngineLimits, install: bool) -> Engine:
    try:
        found = importlib.metadata.version("minijinja")
    except importlib.metadata.PackageNotFoundError:
        raise EngineUnavailable("minijinja", "the minijinja Python package is not installed (pip install 'chatjinja[portability]')") from None
    if not found.split(".")[0] in ("2", "3"):
        raise EngineUnavailable("minijinja", f"minijinja {found} is installed; chatjinja drives 2.x and 3.x")
    return Engine("minijinja", found, (sys.executable, "-I", str(_DRIVERS / "minijinja_driver.py")), limits)


# --- @huggingface/jinja ------------------------------------------------------------------------


def _hfjs(limits: EngineLimits, install: bool) -> Engine:
    node = shutil.which("node")
    if node is None:
        raise EngineUnavailable("hfjs", "node is not installed (it runs @huggingface/jinja)")
    folder = engines_dir() / f"hfjs-{HFJS_VERSION}"
    if not _hfjs_ready(folder):
        if not install:
            raise EngineUnavailable("hfjs", f"{HFJS_PACKAGE} {HFJS_VERSION} is not installed in {folder} (installing it was not allowed)")
        npm = shutil.which("npm")
        if npm is None:
            raise EngineUnavailable("hfjs", f"npm is not installed (it installs {HFJS_PACKAGE})")
        with _install_lock("hfjs") as base:
            if not _hfjs_ready(folder):
                logger.info("installing %s %s with npm into %s (once)", HFJS_PACKAGE, HFJS_VERSION, folder)
                staging = Path(tempfile.mkdtemp(prefix=".hfjs-", dir=base))
                try:
                    (staging / "package.json").write_text('{"name": "chatjinja-hfjs", "private": true}\n')
                    _run_tool([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--save-exact",
                               f"{HFJS_PACKAGE}@{HFJS_VERSION}"], f"npm install {HFJS_PACKAGE}@{HFJS_VERSION}", "hfjs", 300, staging)
                    lock = json.loads((staging / "package-lock.json").read_text())
                    integrity = lock.get("packages", {}).get(f"node_modules/{HFJS_PACKAGE}", {}).get("integrity")
                    if integrity != HFJS_INTEGRITY:
                        raise EngineUnavailable("hfjs", f"npm installed {HFJS_PACKAGE} with integrity {integrity}, not the pinned {HFJS_INTEGRITY}")
                    if folder.exists():
                        shutil.rmtree(folder)
                    staging.rename(folder)
                finally:
                    if staging.exists():
                        shutil.rmtree(staging, ignore_errors=True)
    heap = f"--max-old-space-size={max(limits.memory >> 20, 64)}"  # V8's heap: the memory limit
    return Engine("hfjs", HFJS_VERSION, (node, heap, str(_DRIVERS / "hfjs_driver.mjs"), str(folder)), limits, reserved=1 << 30)


def _hfjs_ready(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "node_modules" / HFJS_PACKAGE / "package.json").read_text())
        lock = json.loads((folder / "package-lock.json").read_text())
    except (OSError, ValueError):
        return False
    integrity = lock.get("packages", {}).get(f"node_modules/{HFJS_PACKAGE}", {}).get("integrity")
    return manifest.get("version") == HFJS_VERSION and integrity == HFJS_INTEGRITY


# --- llama.cpp ---------------------------------------------------------------------------------


def _llamacpp_binary() -> Path:
    driver = (_DRIVERS / "llamacpp_driver.cpp").read_bytes()
    key = hashlib.sha256(driver + " ".join(_CXXFLAGS).encode()).hexdigest()[:12]
    return engines_dir() / f"llamacpp-{LLAMACPP_VERSION}" / f"jinja-driver-{key}"


def _llamacpp(limits: EngineLimits, install: bool) -> Engine:
    binary = _llamacpp_binary()
    if not binary.is_file():
        if not install:
            raise EngineUnavailable("llamacpp", f"llama.cpp's engine is not built in {binary.parent} (building it was not allowed)")
        compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
        if compiler is None:
            raise EngineUnavailable("llamacpp", "no C++ compiler (g++) to build llama.cpp's engine")
        with _install_lock("llamacpp"):
            if not binary.is_file():
                logger.info("building llama.cpp's engine from %s %s with %s into %s (once; about a minute)",
                            LLAMACPP_SDIST, LLAMACPP_VERSION, Path(compiler).name, binary.parent)
                _build_llamacpp(binary, compiler)
    return Engine("llamacpp", LLAMACPP_VERSION, (str(binary),), limits)


def _build_llamacpp(binary: Path, compiler: str) -> None:
    folder = binary.parent
    folder.mkdir(parents=True, exist_ok=True)
    sources = folder / "src"
    if not (sources / ".complete").is_file():
        _fetch_llamacpp_sources(sources)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=folder))
    try:
        (staging / "ggml.h").write_text(_GGML_STUB)
        output = staging / binary.name
        command = [compiler, *_CXXFLAGS, f"-I{sources / 'common'}", f"-I{sources / 'vendor'}", f"-I{staging}",
                   *(str(sources / path) for path in _LLAMACPP_SOURCES), str(_DRIVERS / "llamacpp_driver.cpp"),
                   "-o", str(output)]
        _run_tool(command, f"compiling llama.cpp's engine with {Path(compiler).name}", "llamacpp", 900)
        output.rename(binary)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch_llamacpp_sources(sources: Path) -> None:
    name = f"{LLAMACPP_SDIST}=={LLAMACPP_VERSION}"
    with tempfile.TemporaryDirectory(prefix=".sdist-", dir=sources.parent) as download:
        _run_tool([sys.executable, "-m", "pip", "download", name, "--no-deps", "--no-binary", LLAMACPP_SDIST,
                   "-d", download, "-q"], f"pip download {name}", "llamacpp", 600)
        archives = list(Path(download).glob("*.tar.gz"))
        if len(archives) != 1:
            raise EngineUnavailable("llamacpp", f"pip download {name} gave no single sdist")
        digest = hashlib.sha256(archives[0].read_bytes()).hexdigest()
        if digest != LLAMACPP_SDIST_SHA256:
            raise EngineUnavailable("llamacpp", f"{archives[0].name} has sha256 {digest}, not the pinned {LLAMACPP_SDIST_SHA256}")
        prefix = f"{LLAMACPP_SDIST.replace('-', '_')}-{LLAMACPP_VERSION}/vendor/llama.cpp/"
        wanted = {prefix + path: path for path in (*_LLAMACPP_SOURCES, *_LLAMACPP_HEADERS)}
        shutil.rmtree(sources, ignore_errors=True)
        with tarfile.open(archives[0]) as archive:
            for member in archive:
                relative = wanted.pop(member.name, None)
                if relative is None or not member.isfile():
                    continue
                target = sources / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                extracted = archive.extractfile(member)
                assert extracted is not None
                target.write_bytes(extracted.read())
        if wanted:
            raise EngineUnavailable("llamacpp", f"the sdist lacks {', '.join(sorted(wanted.values()))}")
        (sources / ".complete").write_text(LLAMACPP_SDIST_SHA256 + "\n")


# --- lookup ------------------------------------------------------------------------------------

_FACTORIES = {"minijinja": _minijinja, "hfjs": _hfjs, "llamacpp": _llamacpp}
_ready: dict[tuple[str, EngineLimits], Engine] = {}
_ready_lock = threading.Lock()


def engine(name: str, *, install: bool = True, limits: EngineLimits = DEFAULT_LIMITS) -> Engine:
    """The engine ``name`` (one of :data:`ENGINE_NAMES`), installed into :func:`engines_dir` first when
    ``install`` allows it; raises :class:`EngineUnavailable` saying what is missing."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown engine {name!r}: choose from {', '.join(ENGINE_NAMES)}")
    with _ready_lock:
        found = _ready.get((name, limits))
        if found is None:
            found = _ready[(name, limits)] = _FACTORIES[name](limits, install)
    return found


def available_engines(names: tuple[str, ...] | list[str] = ENGINE_NAMES, *, install: bool = True,
                      limits: EngineLimits = DEFAULT_LIMITS) -> dict[str, Engine | EngineUnavailable]:
    """Each named engine, or the :class:`EngineUnavailable` that says why it cannot run here."""
    found: dict[str, Engine | EngineUnavailable] = {}
    for name in names:
        try:
            found[name] = engine(name, install=install, limits=limits)
        except EngineUnavailable as missing:
            found[name] = missing
    return found
