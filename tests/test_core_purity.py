"""The pure core imports neither httpx, opentelemetry nor a clock: its Python (the imports of
``core/**/*.py``) and its C (what ``core/wire/*.c`` and ``*.h`` include and call: no clock, no I/O,
no threads, no iterator driven -- that is the transport's)."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

import otel_liveness.core

CORE = pathlib.Path(otel_liveness.core.__file__).parent
FORBIDDEN = ("httpx", "httpx2", "httpcore", "httpcore2", "opentelemetry", "time", "datetime", "asyncio", "anyio",
             "trio", "socket", "threading", "random", "logging")


def imported_modules(path: pathlib.Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_sources_import_nothing_forbidden() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) >= 30  # every module, in every sub-package
    for path in files:
        bad = imported_modules(path) & set(FORBIDDEN)
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_core_imports_without_http_or_otel_installed() -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {FORBIDDEN[:5]!r}:\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import otel_liveness.core, otel_liveness.tools.analyze\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx','httpx2','opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the core's C: the same rule, read from the sources --

#: The system headers a core C file may include: the C API and pure computation (<stdlib.h> for
#: qsort and the like: its impure functions are in C_FORBIDDEN). Anything else (<time.h>,
#: <sys/time.h>, <unistd.h>, <stdio.h>, <pthread.h>, <sys/socket.h>, <fcntl.h>, ...) brings a
#: clock, I/O, threads or processes: the transport's (otel_liveness/transport/*.c).
C_HEADERS = frozenset({"Python.h", "structmember.h", "stddef.h", "stdint.h", "stdbool.h", "string.h", "math.h",
                       "limits.h", "float.h", "assert.h", "inttypes.h", "stdalign.h", "stdarg.h", "ctype.h",
                       "stdlib.h"})
#: What reads a clock, waits, does I/O, starts or syncs threads or processes, draws randomness, or
#: drives an iterator (the body's reads: a driver's loop) -- C library and CPython API alike. A
#: lower-case name (the C library's) counts where it is called or named as ``struct name``; any
#: other (a macro, the C API) wherever it appears. A trailing ``*`` is a prefix.
C_FORBIDDEN = {
    "a clock": ("clock", "clock_gettime", "clock_getres", "time", "gettimeofday", "timespec_get", "times",
                "localtime", "gmtime", "mktime", "timespec", "timeval", "CLOCK_MONOTONIC", "CLOCK_REALTIME",
                "PyTime_*", "_PyTime_*"),
    "a wait": ("sleep", "usleep", "nanosleep", "select", "poll", "epoll_*"),
    "I/O": ("read", "write", "pread", "pwrite", "readv", "writev", "open", "openat", "fopen", "fread", "fwrite",
            "fclose", "fgets", "fputs", "printf", "fprintf", "puts", "perror", "ioctl", "fcntl",
            "PyFile_*", "PySys_Write*", "PySys_Format*", "PyObject_Print"),
    "a socket": ("socket", "connect", "accept", "bind", "listen", "recv", "recvfrom", "recvmsg", "send", "sendto",
                 "sendmsg", "shutdown", "getaddrinfo"),
    "threads": ("pthread_*", "thrd_*", "mtx_*", "cnd_*", "PyThread_*", "PyGILState_*", "PyEval_SaveThread",
                "PyEval_RestoreThread", "Py_BEGIN_ALLOW_THREADS", "Py_END_ALLOW_THREADS"),
    "a process": ("fork", "system", "popen", "kill", "getpid", "execl", "execle", "execlp", "execv", "execve",
                  "execvp"),
    "randomness": ("rand", "srand", "random", "getrandom", "arc4random", "arc4random_buf"),
    "an iterator driven (the body's reads)": ("PyIter_Next", "PyIter_Send", "PyObject_GetIter"),
}


def _c_forbidden(name: str) -> str | None:
    """Why ``name`` is not the core's, or None."""
    for why, names in C_FORBIDDEN.items():
        for entry in names:
            if name == entry or (entry.endswith("*") and name.startswith(entry[:-1])):
                return why
    return None


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def c_split(text: str) -> tuple[str, str]:
    """``text`` twice, the same length and lines: without comments; and without comments or the
    contents of string and character literals (what the code names)."""
    source, code = [], []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            source.append(_blank(text[i:end]))
            code.append(source[-1])
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            source.append(_blank(text[i:end]))
            code.append(source[-1])
        elif text[i] in "\"'":
            end = i + 1
            while end < n and text[end] != text[i]:
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
            source.append(text[i:end])
            code.append(text[i] + _blank(text[i + 1:end - 1]) + text[end - 1])
        else:
            end = i + 1
            source.append(text[i])
            code.append(text[i])
        i = end
    return "".join(source), "".join(code)


def c_impurities(path: pathlib.Path, text: str | None = None, defines: dict[str, str] | None = None) -> list[str]:
    """What in one core C file (or header) is not pure: ``file:line: what`` each. ``defines``: string
    macros from elsewhere (the headers'), for a module named by one."""
    source, code = c_split(path.read_text() if text is None else text)
    defines = {**(defines or {}), **dict(re.findall(r'^\s*#\s*define\s+(\w+)\s+"([^"]*)"', source, re.M))}
    found = []

    def at(offset: int) -> str:
        return f"{path.name}:{source.count(chr(10), 0, offset) + 1}"

    for m in re.finditer(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', source, re.M):
        kind, header = m.groups()
        if kind == "<" and header not in C_HEADERS:
            found.append(f"{at(m.start())}: includes <{header}> (a core C file includes only {sorted(C_HEADERS)})")
        elif kind == '"' and not (path.parent / header).resolve().is_relative_to(CORE.resolve()):
            found.append(f'{at(m.start())}: includes "{header}", outside core/')
    for m in re.finditer(r"\b[A-Za-z_]\w*\b", code):
        name = m.group()
        why = _c_forbidden(name)
        if why is None:
            continue
        if name[0].islower():
            member = code[m.start() - 1:m.start()] == "." or code[max(m.start() - 2, 0):m.start()] == "->"
            called = re.match(r"\s*\(", code[m.end():]) is not None
            tagged = re.search(r"\bstruct\s+$", code[max(m.start() - 16, 0):m.start()]) is not None
            if member or not (called or tagged):
                continue  # a word of C (a variable, a member), not the C library's function or type
        found.append(f"{at(m.start())}: {name} ({why})")
    for m in re.finditer(r'\b(PyImport_\w+|PyCapsule_Import)\s*\(\s*(?:"([^"]*)"|(\w+))', source):
        module = m.group(2) if m.group(2) is not None else defines.get(m.group(3), "")
        if module.split(".")[0] in FORBIDDEN:
            found.append(f"{at(m.start())}: {m.group(1)}({module!r}) (imports {module.split('.')[0]})")
    return found


def _c_defines() -> dict[str, str]:
    """The string macros of the core's headers (a capsule's name is one)."""
    return {name: value for header in CORE.rglob("*.h")
            for name, value in re.findall(r'^\s*#\s*define\s+(\w+)\s+"([^"]*)"', header.read_text(), re.M)}


def test_core_c_sources_read_no_clock_do_no_io_and_start_no_thread() -> None:
    files = sorted(CORE.rglob("*.c")) + sorted(CORE.rglob("*.h"))
    assert {"_lane.c", "_bulk.c"} <= {path.name for path in files}
    found = [line for path in files for line in c_impurities(path, defines=_c_defines())]
    assert not found, ("the core's C must be pure (a clock, I/O, threads and an iterator's reads are the "
                       "transport's):\n  " + "\n  ".join(found))


@pytest.mark.parametrize(("snippet", "expected"), [
    ("#include <time.h>\n", "x.c:1: includes <time.h>"),
    ("#include <sys/time.h>\n", "includes <sys/time.h>"),
    ("#include <unistd.h>\n", "includes <unistd.h>"),
    ("#include <pthread.h>\n", "includes <pthread.h>"),
    ('#include "../transport/x.h"\n', 'includes "../transport/x.h", outside core/'),
    ("int f(void) {\n    struct timespec ts;\n    clock_gettime(CLOCK_MONOTONIC, &ts);\n}\n", "x.c:2: timespec (a clock)"),
    ("int f(void) {\n    struct timespec ts;\n    clock_gettime(CLOCK_MONOTONIC, &ts);\n}\n", "x.c:3: clock_gettime"),
    ("double t = (double)time(NULL);\n", "x.c:1: time (a clock)"),
    ("gettimeofday(&tv, NULL);\n", "gettimeofday (a clock)"),
    ("n = read(fd, buf, 4);\n", "read (I/O)"),
    ("n = recv(fd, buf, 4, 0);\n", "recv (a socket)"),
    ("pthread_mutex_lock(&m);\n", "pthread_mutex_lock (threads)"),
    ("int r = rand();\n", "rand (randomness)"),
    ("Py_BEGIN_ALLOW_THREADS\n", "Py_BEGIN_ALLOW_THREADS (threads)"),
    ("PyObject *c = PyIter_Next(it);\n", "PyIter_Next (an iterator driven (the body's reads))"),
    ('PyObject *t = PyImport_ImportModule("time");\n', "PyImport_ImportModule('time') (imports time)"),
    ('#define M "socket"\nPyObject *t = PyImport_ImportModule(M);\n', "x.c:2: PyImport_ImportModule('socket')"),
])
def test_the_c_purity_check_finds(snippet: str, expected: str) -> None:
    found = c_impurities(CORE / "x.c", snippet)
    assert any(expected in line for line in found), found


def test_the_c_purity_check_reads_code_not_comments_strings_or_members() -> None:
    snippet = (
        "/* clock_gettime(CLOCK_MONOTONIC) and read(fd) are the transport's */\n"
        "// time(NULL)\n"
        'PyErr_SetString(PyExc_RuntimeError, "read(): time(NULL) in a message");\n'
        "if (c == '\"') { self->read(x); s.time = 0; double time = 1.0; Lane_close(self); }\n"
        'PyObject *m = PyImport_ImportModule("otel_liveness.core.errors");\n'
    )
    assert c_impurities(CORE / "x.c", snippet) == []
